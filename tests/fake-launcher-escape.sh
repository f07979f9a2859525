#!/bin/sh
# A launcher whose job leaves its process group, as MPICH's hydra_pmi_proxy
# and ranks do (each in a session of its own), one process of it stopped as
# if by SIGSTOP: a signal to the launcher's group reaches neither.  Both
# carry all the arguments, so that a test can find leftovers with pgrep -f
# MARKER.  With FAKE_ESCAPE_EXIT set, the launcher exits with that status
# once both have left, as an mpiexec that died would.
ready=$(mktemp -d "${TMPDIR:-/tmp}/fake-escape.XXXXXX")
setsid sh -c 'touch "$0/escaped"; trap "" TERM; sleep 30; : "$@"' \
    "$ready" "$@" &
setsid sh -c 'touch "$0/stopped"; kill -STOP $$; sleep 30; : "$@"' \
    "$ready" "$@" &
n=0
while { [ ! -e "$ready/escaped" ] || [ ! -e "$ready/stopped" ]; } &&
    [ "$n" -lt 100 ]; do
	sleep 0.1
	n=$((n + 1))
done
rm -rf "$ready"
if [ -n "${FAKE_ESCAPE_EXIT:-}" ]; then
	exit "$FAKE_ESCAPE_EXIT"
fi
sleep 30
