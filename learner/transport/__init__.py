"""Weight transports, one file each: `collective` (the default: gloo on CPU, NCCL on GPU) and
`object_store` (Ray's object store; it also serves a single new or restarted engine). The
protocol, the interface and the registry are in protocol.py; importing this package registers
every transport."""

from learner.transport import collective, object_store  # noqa: F401 - each registers itself on import
from learner.transport.protocol import CATCH_UP, TRANSPORTS, Shipment, TransportCache, WeightTransport

__all__ = ["CATCH_UP", "TRANSPORTS", "Shipment", "TransportCache", "WeightTransport"]
