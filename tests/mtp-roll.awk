# A second reading of multi-token prediction's rolled masks and loss
# factors (tests/mtp-roll.test): Megatron's roll_tensor step by step, as
# core_v0.19.0 multi_token_prediction.py does it, on every sample of every
# micro-batch, and the factors of loss.mtp_scale from the counts.  It
# prints what `gradaudit explain` prints for each layer.
#
# Variables: seq, cp, mb (samples of a micro-batch), K (micro-batches),
# pdp (dp without cp), D (layers), valid (one count per chunk, the cp rank
# fastest, then dp, then the micro-batch), fnum/fden
# (mtp_loss_scaling_factor) and mode (loss.mtp_scale).

function gcd(a, b,	t) {
	if (a < 0)
		a = -a
	while (b != 0) {
		t = a % b
		a = b
		b = t
	}
	return a
}

function q(num, den,	g) {
	if (num == 0)
		return "0"
	g = gcd(num, den)
	num /= g
	den /= g
	return den == 1 ? num "" : num "/" den
}

# One roll by -1 of every cp rank's mask of the current sample, m[r, p]:
# torch.roll of each half, then each half's last element replaced by the
# first of the half that follows it in the sequence (the next rank's first
# half, the last rank's own second half, the previous rank's second half,
# 0 past the end), as roll_tensor's isend/irecv pairs exchange them.
function roll(	r, p, h, L, i, first) {
	L = seq / cp
	if (cp == 1) {
		for (p = 0; p < L - 1; p++)
			m[0, p] = m[0, p + 1]
		m[0, L - 1] = 0
		return
	}
	h = L / 2
	for (r = 0; r < cp; r++)
		for (i = 0; i < 2; i++)
			first[r, i] = m[r, i * h]
	for (r = 0; r < cp; r++)
		for (i = 0; i < 2; i++) {
			for (p = i * h; p < i * h + h - 1; p++)
				m[r, p] = m[r, p + 1]
			if (i == 1)
				m[r, L - 1] = r > 0 ? first[r - 1, 1] : 0
			else if (r < cp - 1)
				m[r, h - 1] = first[r + 1, 0]
			else
				m[r, h - 1] = first[r, 1]
		}
}

BEGIN {
	nchunks = split(valid, v, " ")
	if (nchunks != K * pdp * cp) {
		print "mtp-roll.awk: " nchunks " counts for " K * pdp * cp \
		    " chunks"
		exit 1
	}
	L = seq / cp
	tokens = mb * L
	for (c = 0; c < nchunks; c++)
		for (k = 1; k <= D; k++)
			n[k, c] = 0
	for (mi = 0; mi < K; mi++)
		for (d = 0; d < pdp; d++)
			for (s = 0; s < mb; s++) {
				for (r = 0; r < cp; r++) {
					c = (mi * pdp + d) * cp + r
					for (p = 0; p < L; p++)
						m[r, p] = (s * L + p < v[c + 1] + 0)
				}
				for (k = 1; k <= D; k++) {
					roll()
					for (r = 0; r < cp; r++) {
						c = (mi * pdp + d) * cp + r
						for (p = 0; p < L; p++)
							n[k, c] += m[r, p]
					}
				}
			}
	for (k = 1; k <= D; k++) {
		total = 0
		for (c = 0; c < nchunks; c++)
			total += n[k, c]
		# Each layer weighs mtp_loss_scaling_factor / D.
		line = "    layer " k ": expected weight " \
		    q(total == 0 ? 0 : fnum * tokens, fden * D * total) \
		    "; valid and factor by chunk:"
		for (c = 0; c < nchunks; c++) {
			vk = n[k, c]
			group = 0
			for (r = 0; r < cp; r++)
				group += n[k, c - c % cp + r]
			if (vk == 0)
				f = "0"
			else if (mode == "micro-batches")
				f = q(fnum * tokens, fden * D * K * vk)
			else if (mode == "micro-batches-cp")
				f = q(fnum * tokens * cp, fden * D * K * vk)
			else if (mode == "micro-batches-cp-group")
				f = q(fnum * tokens * cp, fden * D * K * group)
			else if (mode == "tokens-global")
				f = q(fnum * tokens, fden * D * total)
			else
				f = "?"
			line = line " " vk ":" f
		}
		print line
	}
}
