#!/bin/bash
# A launch script that stops before its launch: set -e, and a data
# directory that is not there.
set -e
DATA=${1:?usage: fails-first.sh DATA_DIR}
ls "$DATA" >/dev/null
torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 4 --hidden-size 64
