# An independent reading of Megatron-FSDP v2's DBuffer layout
# (GlobalLayout.build in megatron/core/distributed/fsdp/src/megatron_fsdp/
# experimental/layout.py at Megatron d98e8a64dd) for tests/mfsdp-layout.test:
# for a model of two stages of one layer each, with a tied embedding, the
# element ranges of each parameter that each rank owns.  Prints
# "PARAM RANK LO HI" lines (the last stage's output.weight under its logical
# name, embedding.weight), then "verdict 0" when both stages cut the tied
# weight alike and "verdict 1" otherwise.
#
# Variables: dp, vocab, hidden, ffn, experts (0: a dense MLP), eff (the
# experts' ffn), qk (1: qk-norm of head_dim hd).

function lcm(a, b,    x, y, t) {
	x = a; y = b
	while (y != 0) { t = x % y; x = y; y = t }
	return a / x * b
}

function pad(v, m) { return int((v + m - 1) / m) * m }

# add(NAME, ROWS, ROW): a tensor of ROWS rows of ROW elements in the unit.
function add(name, rows, row) {
	nt++; tname[nt] = name; tnumel[nt] = rows * row; trow[nt] = row
}

# Lay out tensors 1..nt as GlobalLayout.build does and print the owned
# ranges of stage `stage`'s ranks.
function build(stage,    chunk, i, j, k, nreg, nfrag, reg, frag, t, next_,
    gap, gend, rem, cr, at, size, shard, lo, hi, r, name) {
	chunk = 1
	for (i = 1; i <= nt; i++)
		chunk = lcm(chunk, trow[i])
	nreg = nfrag = 0
	for (i = 1; i <= nt; i++)
		if (tnumel[i] < chunk) frag[++nfrag] = i
		else reg[++nreg] = i
	# A stable sort, largest first.
	for (i = 2; i <= nfrag; i++)
		for (j = i; j > 1 && tnumel[frag[j]] > tnumel[frag[j - 1]]; j--) {
			t = frag[j]; frag[j] = frag[j - 1]; frag[j - 1] = t
		}
	next_ = 0
	for (i = 1; i <= nreg; i++) {
		if (reg[i] == 0) continue
		t = reg[i]; off[t] = next_
		if (tnumel[t] % chunk == 0) { next_ += tnumel[t]; continue }
		gap = next_ + tnumel[t]
		next_ += pad(tnumel[t], chunk)
		gend = next_
		rem = tnumel[t] % chunk
		for (j = i + 1; j <= nreg; j++) {
			if (reg[j] == 0) continue
			cr = tnumel[reg[j]] % chunk
			if (cr == 0 || rem + cr > chunk) continue
			off[reg[j]] = next_ - cr; gend = next_ - cr
			next_ += int(tnumel[reg[j]] / chunk) * chunk
			reg[j] = 0
			break
		}
		for (j = 1; j <= nfrag; j++) {
			if (frag[j] == 0) continue
			at = pad(gap, trow[frag[j]])
			if (at + tnumel[frag[j]] > gend) continue
			off[frag[j]] = at; gap = at + tnumel[frag[j]]; frag[j] = 0
		}
	}
	for (j = 1; j <= nfrag; j++) {
		if (frag[j] == 0) continue
		next_ = pad(next_, trow[frag[j]])
		off[frag[j]] = next_; next_ += tnumel[frag[j]]
	}
	size = pad(next_, chunk * dp)
	shard = size / dp
	for (i = 1; i <= nt; i++)
		for (r = 0; r < dp; r++) {
			lo = off[i] > r * shard ? off[i] : r * shard
			hi = off[i] + tnumel[i]
			if (hi > (r + 1) * shard)
				hi = (r + 1) * shard
			if (lo >= hi) continue
			name = tname[i]
			print name, r + dp * stage, lo - off[i], hi - off[i]
			if (name == "embedding.weight")
				tied[stage, r] = (lo - off[i]) " " (hi - off[i])
		}
	nt = 0
}

BEGIN {
	# Stage 0: layer 0's unit, then the root unit (the embedding).
	add("layers.0.norm1.weight", hidden, 1)
	add("layers.0.mixer.fc1.weight", ffn, hidden)
	add("layers.0.mixer.fc2.weight", hidden, ffn)
	if (qk)
		add("layers.0.mixer.qk_norm.weight", hd, 1)
	add("layers.0.norm2.weight", hidden, 1)
	if (experts) {
		add("layers.0.moe.router.weight", experts, hidden)
		add("layers.0.moe.experts.fc1.weight", experts, eff * hidden)
		add("layers.0.moe.experts.fc2.weight", experts, hidden * eff)
	} else {
		add("layers.0.mlp.fc1.weight", ffn, hidden)
		add("layers.0.mlp.fc2.weight", hidden, ffn)
	}
	build(0)
	add("embedding.weight", vocab, hidden)
	build(0)
	# The last stage's root unit: the final norm, then the output layer.
	add("final_norm.weight", hidden, 1)
	add("embedding.weight", vocab, hidden)
	build(1)
	right = 1
	for (r = 0; r < dp; r++)
		if (tied[0, r] != tied[1, r])
			right = 0
	print "verdict", right ? 0 : 1
}
