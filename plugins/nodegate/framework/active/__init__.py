"""Active stages (traffic between nodes): one skeleton, plan -> run -> sanity -> performance
-> localize -> cleanup, generic over the unit under test (see `active.skeleton`)."""

from nodegate.framework.active.addresses import PeerAddress, peer_address
from nodegate.framework.active.campaign import (
    Campaign,
    EvidenceRefs,
    Execution,
    Side,
    Spawner,
    spawn_failure,
)
from nodegate.framework.active.judge import cleanup_verdicts, failure_status
from nodegate.framework.active.ledger import ProcessLedger
from nodegate.framework.active.rounds import Localizer, Outcome, Round, RoundId, Sanity
from nodegate.framework.active.skeleton import ActiveStage, run_campaign

__all__ = [
    "ActiveStage",
    "Campaign",
    "EvidenceRefs",
    "Execution",
    "Localizer",
    "Outcome",
    "PeerAddress",
    "ProcessLedger",
    "Round",
    "RoundId",
    "Sanity",
    "Side",
    "Spawner",
    "cleanup_verdicts",
    "failure_status",
    "peer_address",
    "run_campaign",
    "spawn_failure",
]
