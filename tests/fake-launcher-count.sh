#!/bin/sh
# A launcher that only counts its calls: `fake-launcher-count.sh FILE -n P
# CMD ...` appends a line to FILE and exits 0 without running anything.
echo "$*" >>"$1"
