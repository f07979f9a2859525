# The configs of the fix tests (fix-fixes.test, fix-probe.test), one a
# line, a YAML flow mapping: a mesh, a dense or MoE model (with
# multi-token prediction, auxiliary losses, qk-norm, tied embeddings some
# of the time), the loss's keys and objective, the sync knobs, one of the
# norm's bugs, FSDP2, or a framework profile that decides most of it.
#
#	awk -v n=COUNT -v seed=SEED -f tests/fix-configs.awk
function pick(s,   a, k) { k = split(s, a, " "); return a[int(rand() * k) + 1] }
BEGIN {
	srand(seed)
	split("tp_duplicates every-tp-rank tied_copies both expert_filter " \
	    "dense-tp expert_norm average expert_norm local shard_group " \
	    "always shard_group never pp_reduce none clip_ranks tp-rank-0", gn)
	for (i = 1; i <= n; i++) {
		dp = pick("1 2 2 3 4"); cp = rand() < 0.3 ? 2 : 1
		pp = rand() < 0.3 ? 2 : 1; tp = pick("1 1 2 4")
		moe = rand() < 0.45; ep = 1; etp = 1
		if (moe) {
			ep = pick("1 2 4")
			etp = tp > 1 && rand() < 0.4 ? 2 : \
			    tp > 1 && rand() < 0.5 ? 1 : tp
		}
		fw = rand() < 0.2 ? pick("megatron-core@0.5.0 " \
		    "megatron-core@0.8.0 megatron-core@0.10.0 " \
		    "megatron-core@0.13.0 megatron-core@0.16.0 " \
		    "megatron-core@0.19.0 torchtitan@0.2.0 torchtitan@0.2.2 " \
		    "torchtitan@main") : ""
		s = "{name: gen-" i
		if (fw != "")
			s = s ", framework: \"" fw "\""
		s = s ", mesh: {dp: " dp ", tp: " tp ", pp: " pp
		if (cp > 1)
			s = s ", cp: " cp
		if (moe)
			s = s ", ep: " ep ", etp: " etp
		s = s "}, model: {layers: " pp * 2
		if (rand() < 0.4)
			s = s ", tie_embeddings: true"
		if (rand() < 0.15)
			s = s ", qk_norm: true"
		mtp = rand() < 0.15 && !(moe && ep > 1) ? pick("1 2") : 0
		if (mtp)
			s = s ", mtp: " mtp
		if (moe) {
			s = s ", moe: {experts: 4, top_k: 2"
			if (rand() < 0.3)
				s = s ", aux_loss_coeff: \"0.01\""
			if (rand() < 0.2)
				s = s ", shared_experts: 1, shared_expert_gate: true"
			s = s "}"
		}
		s = s "}, training: {micro_batches: " pick("1 1 2 3")
		if (rand() < 0.5)
			s = s ", distributed_optimizer: true"
		if (tp > 1 && rand() < 0.5)
			s = s ", sequence_parallel: true"
		if (rand() < 0.2)
			s = s ", average_in_collective: true"
		s = s "}"
		if (fw == "" || rand() < 0.3) {
			s = s ", loss: {valid_tokens: " pick("uneven uneven all")
			if (rand() < 0.5)
				s = s ", normalize_by: " pick("global global " \
				    "global-without-cp global-cp-duplicated " \
				    "rank micro-batch micro-batch-cp " \
				    "micro-batch-own none")
			if (rand() < 0.4)
				s = s ", scale: " pick("dp-cp dp cp none")
			if (rand() < 0.25)
				s = s ", objective: " pick("token-mean " \
				    "micro-batch-mean sum")
			if (rand() < 0.2)
				s = s ", aux_scale: " pick("micro-batches-cp " \
				    "micro-batches tokens-tp-cp tokens-local none")
			if (mtp && rand() < 0.5)
				s = s ", mtp_scale: " pick("micro-batches " \
				    "micro-batches-cp tokens tokens-local " \
				    "tokens-global")
			s = s "}"
		}
		if (fw == "") {
			s = s ", sync: {dp_divisor: " (rand() < 0.7 ? "dp-cp" : \
			    pick("dp cp none"))
			if (rand() < 0.3)
				s = s ", embedding_grad: " pick("before-dp " \
				    "after-dp separate-bucket")
			if (moe && rand() < 0.3)
				s = s ", router_grad: " pick("auto none " \
				    "tp-all-reduce")
			if (moe && rand() < 0.2)
				s = s ", expert_input_grad: " \
				    pick("etp-all-reduce none")
			if (moe && rand() < 0.2)
				s = s ", moe_input_grad: " pick("auto " \
				    "replicate partial")
			if (moe && rand() < 0.1)
				s = s ", router_input_grad: " \
				    pick("none tp-all-reduce")
			if (rand() < 0.2)
				s = s ", sp_param_grad: " pick("tp-all-reduce " \
				    "none skip-standalone")
			if (moe && rand() < 0.3)
				s = s ", expert_grad_divisor: " pick("dp edp")
			if (rand() < 0.1)
				s = s ", dp_group: " pick("dp-cp dp")
			if (rand() < 0.15)
				s = s ", qk_norm_grad: " pick("tp-all-reduce " \
				    "none with-sp")
			s = s "}"
			if (rand() < 0.3) {
				k = int(rand() * 9) * 2 + 1
				s = s ", grad_norm: {" gn[k] ": " gn[k + 1] "}"
			}
			if (rand() < 0.15)
				s = s ", layout: {dp_engine: fsdp2}"
		}
		print s "}"
	}
}
