# Turn the pretty-printed JSON of `gradaudit check --format json` into one
# line per cell, "PARAM rank=R [LO,HI) used=U ok=O EXPR" (followed by
# " numeric_ok=N hash_matches=H" after a numeric audit, H telling whether
# the cell's hash equals its region's reference hash), one line per
# finding, "finding KIND PARAM...", and the verdicts, "symbolic correct=C"
# and after a numeric audit "numeric correct=C", so that testdata
# expectations can be matched line by line with grep -Fx.  It relies only
# on the emitter's layout: one key per line, arrays of numbers one element
# per line.
function unquote(s) {
	sub(/^[^:]*: */, "", s); sub(/,$/, "", s)
	gsub(/^"|"$/, "", s)
	return s
}
/^  "numerics": \{/	{ innumerics = 1; next }
innumerics && /^  \}/	{ innumerics = 0; next }
innumerics && /^    "correct": /	{ print "numeric correct=" unquote($0); next }
/^  "correct": /		{ print "symbolic correct=" unquote($0); next }
/^      "name": /	{ param = unquote($0); next }
/^          "rank": /	{ rank = unquote($0); next }
/^          "region": \[/	{ inregion = 1; nreg = 0; next }
inregion && /\]/	{ inregion = 0; next }
inregion		{ v = $0; gsub(/[ ,]/, "", v); reg[nreg++] = v; next }
/^          "used": /	{ used = unquote($0); next }
/^          "ok": /	{ okv = unquote($0); numok = hash = refhash = ""; next }
/^          "hash": /	{ hash = unquote($0); next }
/^          "reference_hash": /	{ refhash = unquote($0); next }
/^          "numeric_ok": /	{ numok = " numeric_ok=" unquote($0); next }
/^          "expr": /	{
	matches = ""
	if (hash != "" && refhash != "")
		matches = " hash_matches=" (hash == refhash ? "true" : "false")
	printf "%s rank=%s [%s,%s) used=%s ok=%s %s%s%s\n", param, rank,
	    reg[0], reg[1], used, okv, unquote($0), numok, matches
	next
}
/^  "findings": /		{ infind = 1; next }
infind && /^      "kind": /	{ kind = unquote($0); next }
infind && /^      "params": \[/	{ inparams = 1; plist = ""; next }
inparams && /\]/	{
	inparams = 0
	printf "finding %s%s\n", kind, plist
	next
}
inparams		{ v = $0; gsub(/[ ,"]/, "", v); plist = plist " " v; next }
