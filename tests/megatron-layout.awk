# An independent reading of Megatron-core's gradient buffer layout, for
# tests/megatron-layout.test: the index loop of
# _ParamAndGradBuffer.__init__ (GradBuffer.__init__ before 0.6) written out
# era by era as the code does it, not through gradaudit's layout rules.
# For the tied word embedding of a pp = 2, tp = 1 model with the
# distributed optimizer, it prints which elements each rank's optimizer
# owns ("R LO HI", R = dp_rank + dp * stage, merged ranges) and whether
# the all-reduce after the reduce-scatter is right ("verdict 0", "verdict
# 1"), or "verdict crash" where the code asserts at start-up: the buffer's
# `data_start_index % dp == 0` (0.6 to 0.8), or the distributed
# optimizer's "each param only belongs to a single bucket", which a rank
# owning parts of the tied weight in two buckets breaks.
#
# Variables: era (legacy, 0.5, 0.6, 0.7, 0.8, 0.9, 0.13), dp, vocab,
# hidden, ffn, layers (per stage), qk (0/1), head_dim, overlap (0/1),
# bucket (elements, 0 for none).
function pad(x, q) { return int((x + q - 1) / q) * q }
function gcd(a, b,    t) { while (b) { t = a % b; a = b; b = t }; return a }

# The parameters of one stage in registration order (model.c): sizes in
# size[1..n], the tied weight's index in tied.
function stage_params(stage,    n, l) {
	n = 0
	if (stage == 0)
		size[++n] = vocab * hidden		# embedding.weight
	for (l = 0; l < layers; l++) {
		size[++n] = hidden			# norm1
		size[++n] = ffn * hidden		# mixer.fc1
		size[++n] = hidden * ffn		# mixer.fc2
		if (qk)
			size[++n] = head_dim		# mixer.qk_norm
		size[++n] = hidden			# norm2
		size[++n] = ffn * hidden		# mlp.fc1
		size[++n] = hidden * ffn		# mlp.fc2
	}
	if (stage == 1) {
		size[++n] = hidden			# final_norm
		size[++n] = vocab * hidden		# output.weight
	}
	tied = stage == 0 ? 1 : n
	return n
}

# The padding rules of the era, with the distributed optimizer.
function end_quantum() { return era_lcm ? dp / gcd(dp, 128) * 128 : dp }
function pad_end(x) { return pad(x, end_quantum()) }
function pad_start(x) { return era_align64 ? pad(x, 64) : x }

# _create_new_bucket: the bucket [bstart, pad_end(end)); returns that end.
function new_bucket(end,    e) {
	e = pad_end(end)
	nb++
	bs[nb] = bstart
	be[nb] = e
	bstart = e
	nbp = 0
	return e
}

function layout(stage,    n, i, own, start, end, limit) {
	n = stage_params(stage)
	nb = 0; bstart = 0; nbp = 0; pos = 0
	# DDP.__init__: buckets only with overlap, and only on stage 0.
	limit = 0
	if (overlap && bucket > 0 && stage == 0 && era != "legacy")
		limit = bucket
	for (i = n; i >= 1; i--) {	# params[::-1]
		pos = pad_start(pos)
		own = era_own && i == tied
		if (own) {
			if (era == "0.6" || era == "0.7" || era == "0.8") {
				if (pos % dp != 0 && nbp > 0)
					crash = 1
				if (nbp > 0)
					new_bucket(pos)
			} else if (era == "0.9") {
				if (pos % dp != 0)
					pos = pad_end(pos)
				if (nbp > 0)
					new_bucket(pos)
			} else if (nbp > 0)
				pos = new_bucket(pos)
		}
		start = pos
		end = pos + size[i]
		pstart[i] = start
		nbp++
		if ((limit > 0 && end - bstart >= limit &&
		    (era != "0.5" || nbp > 1)) || own)
			end = new_bucket(end)
		pos = end
	}
	if (nbp > 0)
		new_bucket(pos)
}

# Each rank's owned part of the tied weight: its shard of every bucket.
function ownership(stage,    r, b, sh, lo, hi, p0, p1, out, nown) {
	p0 = pstart[tied]
	p1 = p0 + size[tied]
	for (r = 0; r < dp; r++) {
		out = ""
		nown = 0
		for (b = 1; b <= nb; b++) {
			sh = (be[b] - bs[b]) / dp
			lo = bs[b] + r * sh
			hi = lo + sh
			if (lo < p0) lo = p0
			if (hi > p1) hi = p1
			if (lo >= hi)
				continue
			out = out " " (lo - p0) " " (hi - p0)
			nown++
		}
		if (nown > 1)
			crash = 1
		owned[stage, r] = merge(out)
	}
}

# "a b c d" with b == c becomes "a d".
function merge(s,    f, n, i, out, lo, hi) {
	n = split(s, f, " ")
	out = ""
	for (i = 1; i <= n; i += 2) {
		if (i > 1 && f[i] == hi) {
			hi = f[i + 1]
			continue
		}
		if (i > 1)
			out = out " " lo " " hi
		lo = f[i]; hi = f[i + 1]
	}
	if (n > 0)
		out = out " " lo " " hi
	return substr(out, 2)
}

BEGIN {
	era_own = era != "legacy" && era != "0.5"
	era_lcm = era == "0.7" || era == "0.8" || era == "0.9" || era == "0.13"
	era_align64 = era == "0.8" || era == "0.9" || era == "0.13"
	crash = 0
	for (stage = 0; stage < 2; stage++) {
		layout(stage)
		ownership(stage)
	}
	right = 1
	for (r = 0; r < dp; r++) {
		for (stage = 0; stage < 2; stage++)
			if (owned[stage, r] != "")
				print r + dp * stage, owned[stage, r]
		if (owned[0, r] != owned[1, r])
			right = 0
	}
	# Before 0203a13 the all-reduce ran before the reduce-scatter.
	if (era == "legacy")
		right = 1
	# No qk layernorm before 0.6 (7334edfc73): a configuration error.
	if (qk && (era == "legacy" || era == "0.5"))
		print "verdict 2"
	else
		print "verdict", crash ? "crash" : right ? 0 : 1
}
