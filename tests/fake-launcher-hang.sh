#!/bin/sh
# A launcher whose job never ends.  It leaves a child that carries all of
# its arguments, so a test can look for leftovers with pgrep -f MARKER.
sh -c 'sleep 100; : "$@"' fake-hang-child "$@" &
sleep 100
