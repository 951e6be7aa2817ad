"""Inventory: which nodes, how to reach them, how they group (nodegate YAML, Ansible INI/YAML)."""

from nodegate.inventory.loader import load_inventory
from nodegate.inventory.nodes import (
    DataPlane,
    FrozenMap,
    Inventory,
    InventorySettings,
    Node,
    SSHSettings,
    natural_key,
)
from nodegate.inventory.sshconfig import ResolvedHost, SSHConfig

__all__ = [
    "DataPlane",
    "FrozenMap",
    "Inventory",
    "InventorySettings",
    "Node",
    "ResolvedHost",
    "SSHConfig",
    "SSHSettings",
    "load_inventory",
    "natural_key",
]
