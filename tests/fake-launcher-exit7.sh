#!/bin/sh
# A launcher that fails with a status outside gradaudit's 0..3, as hydra
# does with the signal number of a rank that died.
exit 7
