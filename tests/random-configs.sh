# The held-out configurations: a deterministic stream of random meshes,
# flags, sync knobs, model variants and plans' declarations of
# activations' gradients (none of them in testdata/).  The tests that
# audit them share it, so that both read the same stream and a change to
# it reaches both: agree-random.test holds the engines to each other on
# them, compare-oracle-random.test holds gradaudit compare to the engines.
# Sourced after tests/setup.sh:
#
#	random_configs COUNT SEED FILE
#		write the draws of COUNT configs to FILE, one line each
#	random_config INDEX YAML LINE...
#		write the INDEX-th config, of a line of those draws (its
#		words as arguments), to YAML; set random_plan to its
#		declarations ("declare:activation", each followed by a
#		space) and random_desc to a one-line description of it
#
# Like the loop they came from, they set the variables they use (i, f,
# dp, pp, tp, plan, ...): a caller reads only those named above.

# The third stream of draws (random_configs): the model's variants and
# the plan's declarations of activations' gradients (gradaudit.yaml(5),
# plan): a duplicated mixer (slime PR #1748), experts masked on the tp
# group (transformers PR #48205), the router's scores detached (NeMo
# Automodel PR #2995), the output layer's input (torchtitan PR #3412).
# Each row of declares is a declaration and what it needs of the config.
# Half of the configs without MTP have the duplicated mixer, half of
# those with MoE mask their experts on the tp group (which sets ep to tp
# and etp to 1, as the loader wants; the meshes of the others stay those
# of the seed).  Two in three declare; for each activation they draw a
# number, or -1 for none two times in five, that picks among the rows of
# that activation whose needs the config meets (declaration below), so
# that the loader takes most.
declares='partial:mixer-input mixer
replicate:mixer-input mixer
partial:router-scores tp-mask
detached:router-scores moe,no-mtp
partial:experts-input tp-mask
partial:output -
replicate:output no-mtp'

# random_configs COUNT SEED FILE: three streams of draws, side by side.
random_configs()
{
	# One config per line: dp pp tp moe ep etp sbe tie distopt sp avg bucket
	#                      embedding router expert_input sp_param divisor norm
	awk -v n="$1" -v seed="$2" 'BEGIN {
		srand(seed)
		split("1 2 3 4", dps); split("1 2 3", pps); split("1 2 4", tps)
		split("before-dp after-dp separate-bucket", emb)
		split("auto none tp-all-reduce", rtr)
		split("etp-all-reduce none", ein); split("tp-all-reduce none", spp)
		split("dp edp", div)
		for (i = 0; i < n; i++) {
			tp = tps[int(rand() * 3) + 1]
			etp = tp > 1 && rand() < 0.5 ? 2 : 1
			printf "%d %d %d %d %d %d %d %d %d %d %d %d %s %s %s %s %s\n",
			    dps[int(rand() * 4) + 1], pps[int(rand() * 3) + 1], tp,
			    rand() < 0.6, 2 ^ int(rand() * 3), etp, rand() < 0.5,
			    rand() < 0.5, rand() < 0.5, rand() < 0.4, rand() < 0.3,
			    rand() < 0.3 ? 100 : 0, emb[int(rand() * 3) + 1],
			    rand() < 0.7 ? "auto" : rtr[int(rand() * 3) + 1],
			    ein[int(rand() * 2) + 1], spp[int(rand() * 2) + 1],
			    div[int(rand() * 2) + 1]
		}
	}' >"$3"
	# And for each, its own stream: a grad_norm setting, correct two times in
	# three, one of the values that model a bug otherwise (gradaudit.yaml(5)),
	# so that the engines' norms are held against each other on held-out meshes.
	awk -v n="$1" -v seed="$(($2 + 596))" 'BEGIN {
		srand(seed)
		k = split("tp_duplicates:every-tp-rank tied_copies:both " \
		    "expert_filter:dense-tp expert_norm:average expert_norm:local " \
		    "expert_norm:omit shard_group:always shard_group:never " \
		    "pp_reduce:none clip_ranks:tp-rank-0", bug)
		for (i = 0; i < n; i++)
			print rand() < 0.34 ? bug[int(rand() * k) + 1] : "pp_reduce:all-reduce"
	}' >"$3.norms"
	# And a third stream (declares above).
	nacts=$(printf '%s\n' "$declares" | sed 's/^[^:]*:\([^ ]*\) .*/\1/' |
	    sort -u | wc -l)
	awk -v n="$1" -v nacts="$nacts" \
	    -v seed="$(($2 + 2995))" 'BEGIN {
		srand(seed)
		for (i = 0; i < n; i++) {
			printf "%d %s", rand() < 0.5,
			    rand() < 0.5 ? "tp-mask" : "all-to-all"
			declaring = rand() < 0.67
			for (a = 1; a <= nacts; a++)
				printf " %d", (declaring && rand() < 0.6 ? \
				    int(rand() * 1000) : -1)
			printf "\n"
		}
	}' >"$3.variants"
	paste -d ' ' "$3" "$3.norms" "$3.variants" >"$3.both"
	mv "$3.both" "$3"
	rm -f "$3.norms" "$3.variants"
}

# declaration HAVE PICKS: the declarations, "declare:activation" a line,
# for a config that meets the needs in HAVE and the numbers PICKS, one
# for each activation in the order they first appear in declares.
declaration()
{
	printf '%s\n' "$declares" | awk -v have=" $1 " -v picks="$2" '
	{
		split($1, w, ":")
		if (!(w[2] in act))
			act[w[2]] = ++nacts
		nneeds = split($2, need, ",")
		for (k = 1; k <= nneeds; k++)
			if (index(have, " " need[k] " ") == 0)
				next
		a = act[w[2]]
		fits[a, ++nfits[a]] = $1
	}
	END {
		split(picks, pick, " ")
		for (a = 1; a <= nacts; a++)
			if (pick[a] >= 0 && nfits[a] > 0)
				print fits[a, pick[a] % nfits[a] + 1]
	}'
}

# random_config INDEX YAML LINE...: the config; some of its keys come
# from the index rather than from the draws (below).
random_config()
{
	i=$1
	f=$2
	shift 2
	dp=$1 pp=$2 tp=$3 moe=$4 ep=$5 etp=$6 sbe=$7 tie=$8 distopt=$9
	shift 9
	sp=$1 avg=$2 bucket=$3 emb=$4 router=$5 ein=$6 spp=$7 div=$8 norm=$9
	shift 9
	mixer=$1 epon=$2
	shift 2
	picks=$*
	{
		echo "name: random-$i"
		# From the index, not the random stream, so that the meshes stay
		# those of the seed: every third multi-stage one interleaved, a
		# vocabulary that tp and the divisor pad.
		vpp=1
		[ "$pp" -gt 1 ] && [ $((i % 3)) = 1 ] && vpp=2
		# Every odd one has multi-token prediction, two layers in every
		# fourth of those, from the index too (so never with the
		# Replicate or Partial MoE boundary or the router's all-reduce
		# below, which it is not modelled with, nor with a duplicated
		# mixer).
		mtp=0
		[ $((i % 2)) = 1 ] && mtp=1
		[ $((i % 8)) = 3 ] && mtp=2
		[ "$mtp" -gt 0 ] && mixer=0
		# Experts masked on the tp group have the tp group for their
		# ep group, with no expert tensor parallelism.
		if [ "$moe" = 1 ] && [ "$epon" = tp-mask ]; then
			ep=$tp etp=1
		else
			epon=all-to-all
		fi
		# Every fourth MoE one with tp and no sequence parallelism (even,
		# so without MTP) dispatches every tp rank's copy of its tokens
		# (NeMo Automodel #2995) over an ep group of whole tp groups,
		# every other of those divided by tp as Automodel does.
		etd= lsplit=0 mtploss=
		if [ "$moe" = 1 ] && [ "$tp" -gt 1 ] && [ "$sp" = 0 ] &&
		    [ $((i % 4)) = 0 ]; then
			epon=tp-replicated ep=$tp etp=1
			etd=", expert_tp_divisor: $([ $((i % 8)) = 0 ] && echo tp || echo none)"
		fi
		echo "mesh: {dp: $dp, pp: $pp, tp: $tp, ep: $ep, etp: $etp, vpp: $vpp}"
		echo "model:"
		echo "  layers: $((pp * 2))"
		echo "  vocab: $((29 + i))"
		echo "  vocab_divisible_by: $((1 + i % 4))"
		[ "$tie" = 1 ] && echo "  tie_embeddings: true"
		[ "$mtp" -gt 0 ] && echo "  mtp: $mtp"
		[ "$mixer" = 1 ] && echo "  duplicated_mixer: true"
		[ "$moe" = 1 ] && echo "  moe: {experts: 4, top_k: 2, expert_ffn: 8, every: 2, score_before_experts: $([ "$sbe" = 1 ] && echo true || echo false), shared_experts: $((i % 2)), shared_expert_gate: $([ $((i % 4)) = 3 ] && echo true || echo false), ep_on: $epon}"
		echo "training:"
		echo "  distributed_optimizer: $([ "$distopt" = 1 ] && echo true || echo false)"
		echo "  sequence_parallel: $([ "$sp" = 1 ] && echo true || echo false)"
		echo "  average_in_collective: $([ "$avg" = 1 ] && echo true || echo false)"
		echo "  bucket_elems: $bucket"
		# Every third one accumulates two micro-batches, from the index
		# too (every other of them with MTP).
		mbs=1
		[ $((i % 3)) = 2 ] && mbs=2
		echo "  micro_batches: $mbs"
		# Every fourth one declares the MoE block input Replicate
		# (torchtitan before PR #2416), every eighth other one Partial
		# (torchtitan de329200b), and every sixth one all-reduces the
		# router's input gradient inside the block (de329200b too),
		# also from the index: all even, since the odd ones have MTP.
		mig=auto rig=none
		[ $((i % 4)) = 2 ] && mig=replicate
		[ $((i % 8)) = 4 ] && mig=partial
		[ $((i % 6)) = 0 ] && rig=tp-all-reduce
		# The MoE ones with MTP, dp > 1 and ep > 1 at i % 8 of 1, 3
		# and 5 (one layer, two, one) have a loss whose ranks of an
		# ep group may scale a layer differently, which keeps the
		# experts' layer atoms per source where the ep group spans dp
		# ranks (lossnorm.c, mtp_factors_differ): dp0 holds one valid
		# token, which the roll leaves no label, and a layer divides by
		# the step's rolled count (right: dp0's factor is 0, and its
		# experts' other sources' tokens must not take it) or, at 5, by
		# each rank's own, times its main count (Megatron-LM #7452's
		# local counts, wrong with uneven counts).  All odd, so never
		# with the micro-batch normalization below.
		if [ "$mtp" -gt 0 ] && [ "$moe" = 1 ] && [ "$ep" -gt 1 ] &&
		    [ "$dp" -gt 1 ] && [ $((i % 8)) != 7 ]; then
			toks=1 j=1
			while [ $j -lt "$dp" ]; do
				j=$((j + 1))
				toks="$toks, $(((i * 7 + j * 5) % 15 + 2))"
			done
			# One count a chunk: the micro-batches repeat dp's.
			[ "$mbs" = 2 ] && toks="$toks, $toks"
			mtploss="valid_tokens: \"$toks\", normalize_by: global, scale: none, mtp_scale: $([ $((i % 8)) = 5 ] && echo tokens-local || echo tokens-global)"
			etd="$etd, dp_divisor: none"
			lsplit=1
		fi
		echo "sync: {embedding_grad: $emb, router_grad: $router, expert_input_grad: $ein, sp_param_grad: $spp, expert_grad_divisor: $div, moe_input_grad: $mig, router_input_grad: $rig$etd}"
		echo "grad_norm: {${norm%%:*}: ${norm#*:}}"
		# Every fourth one (even, so without MTP) divides each
		# micro-batch by its own valid tokens (HF transformers before
		# PR #34191), every other of those stating that mean of means
		# as its objective (Megatron-LM without
		# --calculate-per-token-loss), so that the micro-batches of a
		# rank weigh apart where there are two: the default uneven
		# tokens differ among chunks.
		loss=
		[ $((i % 4)) = 2 ] && loss="normalize_by: micro-batch"
		[ $((i % 8)) = 6 ] && loss="$loss, objective: micro-batch-mean"
		[ -n "$mtploss" ] && loss=$mtploss
		[ -n "$loss" ] && echo "loss: {$loss}"
		# The preset, and the declarations whose needs are met.
		have=-
		[ "$mixer" = 1 ] && have="$have mixer"
		[ "$moe" = 1 ] && have="$have moe"
		[ "$epon" = tp-mask ] && have="$have tp-mask"
		[ "$mtp" = 0 ] && have="$have no-mtp"
		plan=$(declaration "$have" "$picks" | tr '\n' ' ')
		if [ -n "$plan" ]; then
			echo "plan:"
			echo "  - preset"
			for d in $plan; do
				echo "  - declare: ${d%%:*}"
				echo "    activation: ${d#*:}"
			done
		fi
	} >"$f"
	random_plan=$plan
	random_mtp_apart=$lsplit
	random_desc="random-$i (dp=$dp pp=$pp vpp=$vpp tp=$tp moe=$moe ep=$ep etp=$etp mtp=$mtp tie=$tie micro_batches=$mbs loss={$loss} grad_norm.$norm mixer=$mixer ep_on=$epon mtp_apart=$lsplit plan=[${plan% }])"
}
