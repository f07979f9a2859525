#!/bin/bash
# A launch script that sets everything up and then only prints the
# command it would run: it never reaches a launcher.
ARGS=(--num-layers 4 --hidden-size 64)
echo "would run: torchrun pretrain_gpt.py ${ARGS[*]}"
