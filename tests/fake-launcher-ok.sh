#!/bin/sh
# A stand-in for mpiexec that runs its command once, as one process:
# `fake-launcher-ok.sh -n P CMD ARG...` becomes `CMD ARG...`.
if [ "$#" -lt 3 ] || [ "$1" != "-n" ]; then
	echo "fake-launcher-ok.sh: expected -n P CMD ..." >&2
	exit 64
fi
shift 2
exec "$@"
