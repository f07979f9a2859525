#!/bin/bash
# Print the command train_gpt.sh runs, a word a line, instead of running
# it: torchrun is a function that prints its name and arguments.  The
# script's own arguments are placeholders; only their places count.
torchrun()
{
	printf '%s\n' torchrun "$@"
}
. ./train_gpt.sh /ckpt /logs gpt2-vocab.json gpt2-merges.txt /data/text_document
