# The ranges of PARAM (-v param=NAME) that each rank's optimizer uses, from
# the lines of tests/cells.awk: one line per rank, "RANK LO HI [LO HI ...]",
# adjacent cells merged, in the order of the cells.
$1 == param && $4 == "used=true" {
	r = substr($2, 6); reg = $3; gsub(/[\[\)]/, "", reg)
	split(reg, b, ",")
	if (r in hi && hi[r] == b[1]) { hi[r] = b[2]; next }
	if (r in hi) out[r] = out[r] " " lo[r] " " hi[r]
	lo[r] = b[1]; hi[r] = b[2]; order[++n] = r
}
END {
	for (i = 1; i <= n; i++) {
		r = order[i]
		if (r in done) continue
		done[r] = 1
		print r, substr(out[r] " " lo[r] " " hi[r], 2)
	}
}
