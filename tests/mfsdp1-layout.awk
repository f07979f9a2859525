# An independent reading of Megatron-FSDP version 1's gradient buffers
# (megatron/core/distributed/fsdp/src/megatron_fsdp/param_and_grad_buffer.py
# at core_v0.19.0, 5be9626709: _get_parameter_groups and
# build_data_parallel_buffer_index) for tests/mfsdp1-layout.test: for a
# model of two stages of one layer each, the element ranges of each
# parameter that each rank owns.  Prints "PARAM RANK LO HI" lines (a tied
# output layer under its logical name, embedding.weight).
#
# Variables: dp, vocab, hidden, ffn, experts (0: a dense MLP), eff (the
# experts' ffn), sffn (a shared expert's ffn, 0: none), qk (1: qk-norm of
# head_dim hd), tie (1: tied embedding),
# bucket (the DDP bucket size for the parameters outside the layers, 0:
# none).

function lcm(a, b,    x, y, t) {
	x = a; y = b
	while (y != 0) { t = x % y; x = y; y = t }
	return a / x * b
}

# add(NAME, ROWS, ROW, EXPERT, UNIT, SHARED): a parameter, in
# named_parameters order.
function add(name, rows, row, expert, unit, shared) {
	np++; pname[np] = name; pnumel[np] = rows * row; prow[np] = row
	pexpert[np] = expert; punit[np] = unit; pshared[np] = shared
}

# Lay out the bucket b[1..nb] (parameter numbers) and print its owners.
function lay_out(stage,    i, j, t, csf, nreg, nfrag, reg, frag, data, gap,
    space, rem, rr, size, shard, r, lo, hi, name) {
	if (nb == 0) return
	# Step 3: sorted(key=shape[1:].numel(), reverse=True) is stable.
	for (i = 2; i <= nb; i++)
		for (j = i; j > 1 && prow[b[j]] > prow[b[j - 1]]; j--) {
			t = b[j]; b[j] = b[j - 1]; b[j - 1] = t
		}
	csf = prow[b[1]]
	for (i = 1; i <= nb; i++) {
		t = b[i]
		if (prow[t] == csf || (csf % prow[t] == 0 && pnumel[t] % csf == 0) ||
		    pnumel[t] < csf)
			continue
		csf = lcm(csf, prow[t])
	}
	nreg = nfrag = 0
	for (i = 1; i <= nb; i++)
		if (pnumel[b[i]] < csf) frag[++nfrag] = b[i]
		else reg[++nreg] = b[i]
	data = 0
	for (i = 1; i <= nreg; i++) {
		t = reg[i]
		if (t == 0) continue
		off[t] = data
		if (pnumel[t] % csf == 0) { data += pnumel[t]; continue }
		gap = data + pnumel[t]
		data += (int(pnumel[t] / csf) + 1) * csf
		rem = pnumel[t] % csf
		space = csf - rem
		for (j = i + 1; j <= nreg; j++) {
			if (reg[j] == 0 || pnumel[reg[j]] % csf == 0) continue
			rr = pnumel[reg[j]] % csf
			if (rem + rr > csf) continue
			off[reg[j]] = data - rr
			space -= rr
			data += int(pnumel[reg[j]] / csf) * csf
			reg[j] = 0
			break
		}
		for (j = 1; j <= nfrag; j++) {
			if (frag[j] == 0 || pnumel[frag[j]] > space) continue
			off[frag[j]] = gap
			space -= pnumel[frag[j]]; gap += pnumel[frag[j]]
			frag[j] = 0
		}
	}
	for (j = 1; j <= nfrag; j++)
		if (frag[j] != 0) { off[frag[j]] = data; data += pnumel[frag[j]] }
	size = int((data + dp * csf - 1) / (dp * csf)) * dp * csf
	shard = size / dp
	for (i = 1; i <= nb; i++) {
		t = b[i]
		for (r = 0; r < dp; r++) {
			lo = off[t] > r * shard ? off[t] : r * shard
			hi = off[t] + pnumel[t]
			if (hi > (r + 1) * shard) hi = (r + 1) * shard
			if (lo >= hi) continue
			print pname[t], r + dp * stage, lo - off[t], hi - off[t]
		}
	}
	nb = 0
}

# Steps 1 and 2 over the parameters 1..np of one stage.
function stage_(stage,    i, j, sum, seen, key) {
	for (i = 1; i <= np; i++) {
		key = pexpert[i] SUBSEP punit[i]
		if (key in seen) continue
		seen[key] = 1
		nb = 0; sum = 0
		for (j = i; j <= np; j++) {
			if (pexpert[j] != pexpert[i] || punit[j] != punit[i])
				continue
			if (pshared[j]) {
				lay_out(stage)
				b[++nb] = j
				lay_out(stage)
				sum = 0
				continue
			}
			b[++nb] = j
			sum += pnumel[j]
			if (punit[j] == "none" && bucket > 0 && sum >= bucket) {
				lay_out(stage)
				sum = 0
			}
		}
		lay_out(stage)
	}
	np = 0
}

function layer(l, p) {
	p = "layers." l "."
	add(p "norm1.weight", hidden, 1, 0, l, 0)
	add(p "mixer.fc1.weight", ffn, hidden, 0, l, 0)
	add(p "mixer.fc2.weight", hidden, ffn, 0, l, 0)
	if (qk)
		add(p "mixer.qk_norm.weight", hd, 1, 0, l, 0)
	add(p "norm2.weight", hidden, 1, 0, l, 0)
	if (experts) {
		add(p "moe.router.weight", experts, hidden, 0, l, 0)
		add(p "moe.experts.fc1.weight", experts, eff * hidden, 1, l, 0)
		add(p "moe.experts.fc2.weight", experts, hidden * eff, 1, l, 0)
		if (sffn) {
			add(p "moe.shared.fc1.weight", sffn, hidden, 0, l, 0)
			add(p "moe.shared.fc2.weight", hidden, sffn, 0, l, 0)
		}
	} else {
		add(p "mlp.fc1.weight", ffn, hidden, 0, l, 0)
		add(p "mlp.fc2.weight", hidden, ffn, 0, l, 0)
	}
}

BEGIN {
	add("embedding.weight", vocab, hidden, 0, "none", tie)
	layer(0)
	stage_(0)
	layer(1)
	add("final_norm.weight", hidden, 1, 0, "none", 0)
	add(tie ? "embedding.weight" : "output.weight", vocab, hidden, 0,
	    "none", tie)
	stage_(1)
}
