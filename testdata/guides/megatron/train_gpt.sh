#!/bin/bash
# The launch script of a team's GPT run, in the shape of Megatron-LM's
# examples/gpt3/train_gpt3_175b_distributed.sh (core_v0.19.0): bash arrays
# of arguments handed to torchrun.  gradaudit-megatron(7) audits it.
#
#	bash train_gpt.sh CHECKPOINT_PATH TENSORBOARD_DIR VOCAB MERGES DATA

export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=8
NUM_NODES=${NUM_NODES:-8}
MASTER_ADDR=${MASTER_ADDR:-localhost}
MASTER_PORT=6000
NODE_RANK=${NODE_RANK:-0}

CHECKPOINT_PATH=$1
TENSORBOARD_LOGS_PATH=$2
VOCAB_FILE=$3
MERGE_FILE=$4
DATA_PATH=$5

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES
    --node_rank $NODE_RANK
    --master_addr $MASTER_ADDR
    --master_port $MASTER_PORT
)

GPT_MODEL_ARGS=(
    --num-layers 40
    --hidden-size 5120
    --num-attention-heads 40
    --seq-length 2048
    --max-position-embeddings 2048
    --attention-backend auto
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 1024
    --train-iters 500000
    --weight-decay 0.1
    --adam-beta1 0.9
    --adam-beta2 0.95
    --init-method-std 0.006
    --clip-grad 1.0
    --bf16
    --lr 6.0e-5
    --lr-decay-style cosine
    --min-lr 6.0e-6
    --lr-warmup-fraction .001
    --lr-decay-iters 430000
    --use-distributed-optimizer
    --overlap-grad-reduce
    --eod-mask-loss
)

MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size 4
    --pipeline-model-parallel-size 4
    --sequence-parallel
)

DATA_ARGS=(
    --data-path $DATA_PATH
    --vocab-file $VOCAB_FILE
    --merge-file $MERGE_FILE
    --split 949,50,1
)

EVAL_AND_LOGGING_ARGS=(
    --log-interval 100
    --save-interval 10000
    --eval-interval 1000
    --save $CHECKPOINT_PATH
    --load $CHECKPOINT_PATH
    --eval-iters 10
    --tensorboard-dir $TENSORBOARD_LOGS_PATH
)

torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    ${GPT_MODEL_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${MODEL_PARALLEL_ARGS[@]} \
    ${DATA_ARGS[@]} \
    ${EVAL_AND_LOGGING_ARGS[@]}
