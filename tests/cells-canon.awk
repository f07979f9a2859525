# Read the JSON report of `gradaudit check --format json`, grouped (the
# default) or with --expand, and print one line per rank and region:
#
#   PARAM RANK [LO,HI) used=U ok=O hash=H | ATOM:COEF ... | ATOM:COEF ...
#
# the value's atoms and the expected value's, in rank order.  For a grouped
# report it expands the ranks of each cell ("0-7,64") and every term ("sum"
# over coordinates "of" a group, "self" or an atom) as the gradaudit(1) man
# page tells a script to, with no other knowledge of gradaudit: the two
# readings of one audit must print the same lines (tests/json-shape.test).
# A term whose group has not "n" members prints "BAD-N"; a weighted one
# ("wcoef") multiplies each atom by its chunk's "loss_factors" (its source
# rank's chunk for an expert atom kept per source, "src"), or by its
# layer's "mtp_loss_factors" for a multi-token prediction atom ("t1").  It
# relies only on the emitter's layout: one key per line, two spaces per
# level.
function unquote(s) {
	sub(/^[^:]*: */, "", s); sub(/,$/, "", s)
	gsub(/^"|"$/, "", s)
	return s
}
function coord(r, d,    s) {
	s = r % (M["dp"] * M["tp"])
	if (d == "pp") return int(r / (M["dp"] * M["tp"]))
	if (d == "dp") return int(s / M["tp"])
	if (d == "tp") return s % M["tp"]
	if (d == "etp") return s % M["etp"]
	if (d == "ep") return int(s / M["etp"]) % M["ep"]
	return int(s / (M["etp"] * M["ep"]))
}
# Add the atoms of piece i of list w, read for rank r, to acc[] as text.
# Exact products of coefficients "n" or "n/d", reduced as gradaudit
# writes them: a piece weighted by the loss (its "wcoef") multiplies it by
# each atom's chunk's factor (mesh "loss_factors").
function gcd(a, b,    t) {
	if (a < 0) a = -a
	if (b < 0) b = -b
	while (b) { t = a % b; a = b; b = t }
	return a
}
function qmul(x, y,    xd, yd, g) {
	xd = 1; yd = 1
	if (index(x, "/")) { xd = substr(x, index(x, "/") + 1); x = substr(x, 1, index(x, "/") - 1) }
	if (index(y, "/")) { yd = substr(y, index(y, "/") + 1); y = substr(y, 1, index(y, "/") - 1) }
	# Cancel across first, so that the products stay exact (below 2^53).
	g = gcd(x, yd); x /= g; yd /= g
	g = gcd(y, xd); y /= g; xd /= g
	x *= y; xd *= yd
	return xd == 1 ? sprintf("%.0f", x) : sprintf("%.0f/%.0f", x, xd)
}
function atom_coef(w, i, a, mb) {
	if (P[w, i, "wcoef"] == "")
		return P[w, i, "coef"]
	if (cls ~ /^t[0-9]+$/)
		return qmul(P[w, i, "wcoef"], MF[substr(cls, 2), \
		    mb * M["dp"] + coord(a, "dp")])
	return qmul(P[w, i, "wcoef"], F[mb * M["dp"] + coord(a, "dp")])
}
# The expert rank of ep coordinate j beside rank a (same pp, etp, edp): the
# source an atom "g5s3" names.
function expert_rank(a, j) {
	return coord(a, "pp") * M["dp"] * M["tp"] + coord(a, "etp") + \
	    M["etp"] * (j + M["ep"] * coord(a, "edp"))
}
# An atom's name: g (h when held), the rank, the expert source's rank
# (src >= 0), the class ("t1" of a layer's atom kept per source too), the
# micro-batch.
function atom_of(a, mb, src,    s) {
	s = (held ? "h" : "g") a
	if (src >= 0)
		s = s "s" expert_rank(a, src)
	s = s cls
	return s (M["micro_batches"] > 1 ? "m" mb : "")
}
# Add the atom of rank a, micro-batch mb and expert source src to acc: a
# weighted piece takes the factor of the chunk whose tokens it holds, the
# source's for an expert atom kept per source.
function add_atom(w, i, acc, a, mb, src) {
	acc[atom_of(a, mb, src)] = atom_coef(w, i, src >= 0 ? \
	    expert_rank(a, src) : a, mb)
}
function expand_piece(w, i, r, acc,    a, d, ns, summed, nv, view, k, nf,
    f, fix, member, count, mb, self, persrc, j) {
	if (P[w, i, "sum"] == "") {
		a = P[w, i, "of"]
		if (a ~ /^self/)
			a = "g" r substr(a, 5)
		acc[a] = P[w, i, "coef"]
		return
	}
	ns = split(P[w, i, "sum"], summed, " ")
	nv = split("pp dp tp mb src", view, " ")
	for (k = 1; k <= ns; k++)
		if (summed[k] !~ /^(pp|dp|tp|mb|src)$/)
			nv = split("pp ep etp edp mb src", view, " ")
	persrc = 0
	for (k = 1; k <= ns; k++)
		if (summed[k] == "src")
			persrc = 1
	for (k = 1; k <= nv; k++)
		fix[view[k]] = 1
	for (k = 1; k <= ns; k++)
		delete fix[summed[k]]
	# "of": "self" or coordinates, then the class of the atoms ("a", "ad",
	# "t1", "held"); "src" summed or fixed marks expert atoms kept per
	# source.
	self = 0; cls = ""; held = 0
	nf = split(P[w, i, "of"], f, " ")
	for (k = 1; k <= nf; k++) {
		if (f[k] == "self")
			self = 1
		else if (f[k] == "held")
			held = 1
		else if (f[k] ~ /^(a|ad|t[0-9]+)$/)
			cls = f[k]
		else {
			d = f[k]; sub(/[0-9]+$/, "", d)
			want[d] = substr(f[k], length(d) + 1) + 0
			if (d == "src")
				persrc = 1
		}
	}
	count = 0
	for (a = 0; a < M["world"]; a++) {
		member = 1
		for (d in fix) {
			if (d == "mb" || d == "src")
				continue
			if (self)
				member = member && coord(a, d) == coord(r, d)
			else
				member = member && coord(a, d) == \
				    ((d in want) ? want[d] : 0)
		}
		if (!member)
			continue
		# The micro-batches: all of them when summed, else the one
		# "of" names; atoms are "g5m1" only with several.
		for (mb = 0; mb < M["micro_batches"]; mb++) {
			if (("mb" in fix) && mb != (("mb" in want) ? \
			    want["mb"] : 0))
				continue
			if (!persrc) {
				add_atom(w, i, acc, a, mb, -1)
				count++
				continue
			}
			for (j = 0; j < M["ep"]; j++)
				if (!("src" in fix) || j == want["src"]) {
					add_atom(w, i, acc, a, mb, j)
					count++
				}
		}
	}
	if (count != P[w, i, "n"])
		acc[-1] = "BAD-N"
	delete want
	delete fix
}
# Atom names ("g5", "g5m1", "g5s3m1", "g5adm1", held ones "h5") plain
# before held, in rank order, then by their suffix: an insertion sort on a
# zero-padded key.
function sortkey(a,    r) {
	r = a; sub(/^[gh]/, "", r); sub(/[^0-9].*$/, "", r)
	return sprintf("%s%09d%s", substr(a, 1, 1), r + 0,
	    substr(a, length(r) + 2))
}
function canon(acc,    a, s, n, keys, i, j, t) {
	s = ""
	if (-1 in acc)
		s = " BAD-N"
	n = 0
	for (a in acc)
		if (a != -1)
			keys[++n] = a
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && sortkey(keys[j - 1]) > sortkey(keys[j]);
		    j--) {
			t = keys[j]; keys[j] = keys[j - 1]; keys[j - 1] = t
		}
	for (i = 1; i <= n; i++)
		s = s " " keys[i] ":" acc[keys[i]]
	return s
}
function emit_rank(r,    w, i, accv, acce) {
	for (i = 1; i <= NP["v"]; i++)
		expand_piece("v", i, r, accv)
	for (i = 1; i <= NP["e"]; i++)
		expand_piece("e", i, r, acce)
	printf "%s %d [%s,%s) used=%s ok=%s hash=%s |%s |%s\n", param, r,
	    reg[0], reg[1], used, okv, hash, canon(accv), canon(acce)
}
function emit(    n, part, k, lo, hi, r, accv, acce, a, kw) {
	if (rank != "") {
		split("", accv); split("", acce)
		for (a in EX) {
			split(a, kw, SUBSEP)
			if (kw[1] == "v") accv[kw[2]] = EX[a]
			if (kw[1] == "e") acce[kw[2]] = EX[a]
		}
		printf "%s %d [%s,%s) used=%s ok=%s hash=%s |%s |%s\n", param,
		    rank, reg[0], reg[1], used, okv, hash, canon(accv),
		    canon(acce)
		return
	}
	n = split(ranks, part, ",")
	for (k = 1; k <= n; k++) {
		lo = part[k]; hi = part[k]
		if (index(part[k], "-")) {
			lo = substr(part[k], 1, index(part[k], "-") - 1)
			hi = substr(part[k], index(part[k], "-") + 1)
		}
		for (r = lo + 0; r <= hi + 0; r++)
			emit_rank(r)
	}
}
/^  "mesh": \{/		{ inmesh = 1; next }
inmesh && /^  \}/	{ inmesh = 0; next }
inmesh && /^    "loss_factors": \[/	{ infac = 1; nfac = 0; next }
infac && /^    \]/	{ infac = 0; next }
infac			{ v = $1; gsub(/[",]/, "", v); F[nfac++] = v; next }
inmesh && /^    "mtp_loss_factors": \[/	{ inmtp = 1; layer = 0; next }
inmtp && /^    \]/	{ inmtp = 0; next }
inmtp && /^      \[/	{ layer++; nfac = 0; next }
inmtp && /^      \]/	{ next }
inmtp			{ v = $1; gsub(/[",]/, "", v); MF[layer, nfac++] = v; next }
inmesh {
	k = $1; gsub(/[":]/, "", k); v = $2; gsub(/,/, "", v)
	M[k] = v + 0
	next
}
/^      "name": /	{ param = unquote($0); next }
/^        \{$/		{
	rank = ranks = hash = ""
	split("", EX); split("", P); NP["v"] = NP["e"] = 0
	next
}
/^          "rank": /	{ rank = unquote($0); next }
/^          "ranks": /	{ ranks = unquote($0); next }
/^          "region": \[/	{ inregion = 1; nreg = 0; next }
inregion && /\]/	{ inregion = 0; next }
inregion		{ v = $0; gsub(/[ ,]/, "", v); reg[nreg++] = v; next }
/^          "used": /	{ used = unquote($0); next }
/^          "ok": /	{ okv = unquote($0); next }
/^          "hash": /	{ hash = unquote($0); next }
/^          "terms": /	{ w = "v"; inlist = $0 !~ /null,?$/; next }
/^          "expected": /	{ w = "e"; inlist = $0 !~ /null,?$/; next }
inlist && /^          [\]\}]/	{ inlist = 0; next }
inlist && /^            "[gh][0-9]+[adsmt0-9]*": / {
	a = $1; gsub(/[":]/, "", a)
	EX[w, a] = unquote($0)
	next
}
inlist && /^            \{/	{ NP[w]++; next }
inlist && /^              "/ {
	k = $1; gsub(/[":]/, "", k)
	P[w, NP[w], k] = unquote($0)
	next
}
/^          "expected_expr": /	{ emit(); next }
