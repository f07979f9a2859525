#!/bin/sh
# A launcher that replaces a file before it starts the job, as a user or a
# checkout could between gradaudit run's check and the job's reading it:
# `fake-launcher-replace.sh NEW FILE LAUNCHER ARG...` renames a copy of NEW
# over FILE, then runs LAUNCHER ARG...
new=$1
file=$2
shift 2
cp "$new" "$file.new" && mv "$file.new" "$file" || exit 70
exec "$@"
