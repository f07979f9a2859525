#!/bin/sh
# A launcher that talks on its stdout before and after it runs the real
# one, as wrappers and some MPI launchers do:
# `fake-launcher-chatter.sh LAUNCHER ARG...` runs LAUNCHER ARG...
echo "fake-launcher-chatter: starting $1"
"$@"
status=$?
printf 'fake-launcher-chatter: done, no newline'
exit $status
