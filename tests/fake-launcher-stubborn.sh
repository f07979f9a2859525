#!/bin/sh
# A launcher that ignores SIGTERM, as a wedged mpiexec might: only the
# SIGKILL that follows the grace period ends it.
trap '' TERM
sh -c 'trap "" TERM; sleep 100; : "$@"' fake-stubborn-child "$@" &
# Loop so that SIGTERM interrupting sleep does not end the script.
while :; do
	sleep 1
done
