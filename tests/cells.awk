# Turn the pretty-printed JSON of `gradaudit check --format json` into one
# line per cell, "PARAM rank=R [LO,HI) used=U ok=O EXPR" (followed by
# " numeric_ok=N hash_matches=H" after a numeric audit, H telling whether
# the cell's hash equals its region's reference hash), one line per
# finding, "finding KIND PARAM...", and the verdicts, "symbolic correct=C"
# and after a numeric audit "numeric correct=C", so that testdata
# expectations can be matched line by line with grep -Fx.  It relies only
# on the emitter's layout: one key per line, arrays of numbers one element
# per line.  The gradient norm gives "grad_norm ranks=R correct=C" per
# distinct norm, "grad_norm ranks=R PARAM min=A max=B values_ok=V" per
# wrongly counted parameter, and after a numeric audit a line per rank in
# the cells' form, "grad_norm rank=R used=true ok=O norm numeric_ok=N
# hash_matches=H", with the verdicts "grad_norm correct=C" and "grad_norm
# numeric correct=C", so that the engines' norms are held against each
# other as the cells are.  Rows of a weight that no update reaches give
# "stale PARAM rank=R rows=[LO,HI)" each.
function unquote(s) {
	sub(/^[^:]*: */, "", s); sub(/,$/, "", s)
	gsub(/^"|"$/, "", s)
	return s
}
/^  "grad_norm": \{/	{ ingn = 1; next }
ingn && /^  \}/	{ ingn = 0; next }
ingn && /^    "correct": /	{ print "grad_norm correct=" unquote($0); next }
ingn && /^        "ranks": /	{ gnclass = unquote($0); next }
ingn && /^        "correct": /	{
	printf "grad_norm ranks=%s correct=%s\n", gnclass, unquote($0)
	next
}
ingn && /^            "param": /	{ gnparam = unquote($0); next }
ingn && /^            "min": /	{ gnmin = unquote($0); next }
ingn && /^            "max": /	{ gnmax = unquote($0); next }
ingn && /^            "values_ok": /	{
	printf "grad_norm ranks=%s %s min=%s max=%s values_ok=%s\n", gnclass,
	    gnparam, gnmin, gnmax, unquote($0)
	next
}
ingn && /^    "reference_hash": /	{ gnref = unquote($0); next }
ingn && /^    "numeric_correct": /	{
	print "grad_norm numeric correct=" unquote($0)
	next
}
ingn && /^        "rank": /	{ gnrank = unquote($0); next }
ingn && /^        "ok": /	{ gnok = unquote($0); next }
ingn && /^        "hash": /	{ gnhash = unquote($0); next }
ingn && /^        "numeric_ok": /	{
	printf "grad_norm rank=%s used=true ok=%s norm numeric_ok=%s hash_matches=%s\n",
	    gnrank, gnok, unquote($0), gnhash == gnref ? "true" : "false"
	next
}
ingn			{ next }
/^  "stale_rows": \[$/	{ instale = 1; next }
instale && /^  \]/	{ instale = 0; next }
instale && /^      "param": /	{ sparam = unquote($0); next }
instale && /^      "rank": /	{ srank = unquote($0); next }
instale && /^      "rows": \[/	{ inrows = 1; nrows = 0; next }
inrows && /\]/	{
	inrows = 0
	printf "stale %s rank=%s rows=[%s,%s)\n", sparam, srank, srow[0], srow[1]
	next
}
inrows			{ v = $0; gsub(/[ ,]/, "", v); srow[nrows++] = v; next }
instale			{ next }
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
