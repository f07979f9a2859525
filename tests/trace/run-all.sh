#!/bin/sh
# Run every real training step of tests/trace/ and its twin, each into its
# own directory under OUT_DIR, and say how long each took:
#
#	sh tests/trace/run-all.sh OUT_DIR
#
# OUT_DIR/CASE/bug and OUT_DIR/CASE/fixed each get parallel/ and reference/
# (sharded.py is correct by default: its bug/ is --bug, its fixed/ the
# default).  PYTHON is the interpreter, /usr/bin/python3 (Debian's
# python3-torch) unless set.  Exits 1 if a program failed.
set -eu

if [ $# -ne 1 ]; then
	echo "usage: sh tests/trace/run-all.sh OUT_DIR" >&2
	exit 2
fi
out=$1
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-/usr/bin/python3}
PYTHONDONTWRITEBYTECODE=1
export PYTHONDONTWRITEBYTECODE

failed=0
step()
{
	dir=$1
	shift
	start=$(date +%s.%N)
	if "$python" "$here/$1.py" "$dir" ${2:+"$2"} >/dev/null; then
		verdict=ok
	else
		verdict=FAILED
		failed=1
	fi
	end=$(date +%s.%N)
	printf '%-6s %s s  %s %s\n' "$verdict" \
	    "$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%5.2f", b - a }')" \
	    "$1.py" "${2:-}"
}

for case in megatron_844 torchtitan_2416 hf_34191 megatron_1446 ddp kohya_924; do
	step "$out/$case/bug" "$case"
	step "$out/$case/fixed" "$case" --fixed
done
step "$out/sharded/fixed" sharded
step "$out/sharded/bug" sharded --bug
exit $failed
