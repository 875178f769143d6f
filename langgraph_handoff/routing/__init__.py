"""Choosing which agent takes a message: rules, embeddings, a model, or a cascade of them.

Every router has ``route(text)`` and ``aroute(text)`` and returns a
:class:`~langgraph_handoff.routing.decision.RouteDecision` with the target, all route scores,
the deciding method and a reason. When nothing is confident enough, ``target`` is the fallback.

>>> from langgraph_handoff.routing import Route, Rule, SemanticRouter, HybridRouter
>>> router = HybridRouter(
...     rules=[Rule("human", commands=["talk to a human", "人工", "נציג"])],
...     semantic=SemanticRouter([Route("orders", examples=["where is my order", "我的订单到哪了"]),
...                              Route("tech", examples=["the app crashes", "应用闪退"])], threshold=0.15),
...     fallback="human",
... )
>>> router.route("我的订单什么时候到").target
'orders'
"""

from langgraph_handoff.routing.close_calls import (
    CloseCall,
    CloseCallSink,
    JsonlCloseCalls,
    MemoryCloseCalls,
    load_close_calls,
)
from langgraph_handoff.routing.decision import Route, RouteDecision
from langgraph_handoff.routing.e5 import E5Encoder, e5_available
from langgraph_handoff.routing.encoders import (
    CharNgramEncoder,
    CombinedEncoder,
    EmbeddingsEncoder,
    WordLlamaEmbeddings,
    wordllama_embeddings,
)
from langgraph_handoff.routing.evaluate import EvalReport, SweepPoint, aevaluate, evaluate
from langgraph_handoff.routing.hybrid import HybridRouter, LLMDecider
from langgraph_handoff.routing.recommended import describe_encoder, recommended_encoder
from langgraph_handoff.routing.rules import Rule, RuleRouter
from langgraph_handoff.routing.semantic import FitReport, RouteCalibration, SemanticRouter

__all__ = [
    "CharNgramEncoder",
    "CloseCall",
    "CloseCallSink",
    "CombinedEncoder",
    "E5Encoder",
    "EmbeddingsEncoder",
    "EvalReport",
    "FitReport",
    "HybridRouter",
    "JsonlCloseCalls",
    "LLMDecider",
    "MemoryCloseCalls",
    "Route",
    "RouteCalibration",
    "RouteDecision",
    "Rule",
    "RuleRouter",
    "SemanticRouter",
    "SweepPoint",
    "WordLlamaEmbeddings",
    "aevaluate",
    "describe_encoder",
    "e5_available",
    "evaluate",
    "load_close_calls",
    "recommended_encoder",
    "wordllama_embeddings",
]
