"""Mixtral (MixtralForCausalLM): the Llama shape with routed experts; vLLM builds its embedding and LM head on every
pipeline stage (0.33.0 models/mixtral.py: MixtralModel.__init__ and MixtralForCausalLM.__init__ create
VocabParallelEmbedding and ParallelLMHead unguarded; seen on the built model, tests/fixtures/oracle-weights)."""
from __future__ import annotations

from kvplan.model.architectures.base import Family

FAMILY = Family(
    name="mixtral",
    source="models/mixtral.py",
    architectures=("MixtralForCausalLM",),
    # no model_types: AWQ checkpoints of other architectures (QuantTrio MiniMax-M2-AWQ) spell model_type mixtral
    pp_vocab_every_stage=("MixtralForCausalLM",),
)
