#!/bin/bash
# A launch script that prepares its data with a Python tool, then trains
# twice: a short run, then the real one with another pipeline split.  The
# first launch of a Megatron entry point is imported.
MODEL=(--num-layers 8 --hidden-size 64 --seq-length 8 --micro-batch-size 1
    --vocab-size 100)
python tools/preprocess_data.py --input data.json --output-prefix data
torchrun --nproc_per_node 4 pretrain_gpt.py "${MODEL[@]}" \
    --tensor-model-parallel-size 2 --train-iters 10
torchrun --nproc_per_node 4 pretrain_gpt.py "${MODEL[@]}" \
    --pipeline-model-parallel-size 2 --train-iters 1000
