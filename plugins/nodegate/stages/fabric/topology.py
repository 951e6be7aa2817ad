"""The discovered fabric as a model: switches by GUID and name, where each CA port lands
(switch and port, with the switch side's width and speed), links between switches, switch
ports with no link partner, leaves (switches with CA partners) and their uplinks.

Built once per observer reading from the parsed ports report (`Topology.of`); the checks ask
it by port GUID. The switch side's line of a cable is the one kept (`fabric.link` judges the
switch side, which can differ from the host's own view).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from nodegate.parsers.ibnetdiscover import PortLine, PortsReport


@dataclass(frozen=True, slots=True)
class Switch:
    guid: str
    lid: int
    name: str  # its node description, trimmed (`leaf-r01-rail3`)


@dataclass(frozen=True, slots=True)
class SwitchPort:
    """One port of a switch, with the negotiated width and speed of its link."""

    switch: Switch
    port: int
    width: str | None
    speed: str | None

    @property
    def label(self) -> str:
        """`leaf-r01-rail3 P12`."""
        return f"{self.switch.name} P{self.port}"


@dataclass(frozen=True, slots=True)
class Uplink:
    """A leaf port whose partner is another switch (or nothing: `remote` None)."""

    local: SwitchPort
    remote: SwitchPort | None

    @property
    def label(self) -> str:
        """The cable by both ends: `leaf-r01-rail3 P33 -> spine02 P5`."""
        far = "(no link partner)" if self.remote is None else self.remote.label
        return f"{self.local.label} -> {far}"


@dataclass(frozen=True)
class Topology:
    """One subnet's discovered topology."""

    switches: Mapping[str, Switch]  # guid -> switch
    ca_ports: Mapping[str, SwitchPort]  # CA port GUID -> the switch port it lands on
    ca_names: Mapping[str, str]  # CA port GUID -> its node description
    switch_links: Mapping[tuple[str, int], SwitchPort]  # (switch guid, port) -> far switch port
    unlinked: Mapping[tuple[str, int], SwitchPort]  # switch ports without a link partner
    by_name: Mapping[str, tuple[Switch, ...]] = field(default_factory=dict)
    ca_at: Mapping[tuple[str, int], str] = field(default_factory=dict)  # switch port -> CA guid
    far_ends: Mapping[str, tuple[tuple[int, SwitchPort | None], ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, report: PortsReport) -> Topology:
        switches: dict[str, Switch] = {}
        for line in report.lines:
            for end in (line.local, line.remote):
                if end is not None and end.kind == "SW" and end.guid not in switches:
                    switches[end.guid] = Switch(end.guid, end.lid, end.description.strip())
        ca_ports: dict[str, SwitchPort] = {}
        ca_names: dict[str, str] = {}
        links: dict[tuple[str, int], SwitchPort] = {}
        unlinked: dict[tuple[str, int], SwitchPort] = {}
        for line in report.lines:
            _add(line, switches, ca_ports, ca_names, links, unlinked)
        names: dict[str, list[Switch]] = {}
        for s in switches.values():
            names.setdefault(s.name, []).append(s)
        unlinked = {k: v for k, v in unlinked.items() if k not in links}
        far: dict[str, list[tuple[int, SwitchPort | None]]] = {}
        for (guid, port), far_end in links.items():
            far.setdefault(guid, []).append((port, far_end))
        for guid, port in unlinked:
            far.setdefault(guid, []).append((port, None))
        return cls(
            switches=switches,
            ca_ports=ca_ports,
            ca_names=ca_names,
            switch_links=links,
            unlinked=unlinked,
            by_name={k: tuple(v) for k, v in names.items()},
            ca_at={(p.switch.guid, p.port): g for g, p in ca_ports.items()},
            far_ends={g: tuple(sorted(v, key=lambda e: e[0])) for g, v in far.items()},
        )

    @cached_property
    def _leaves(self) -> tuple[Switch, ...]:
        guids = {p.switch.guid for p in self.ca_ports.values()}
        return tuple(sorted((self.switches[g] for g in guids), key=lambda s: (s.name, s.guid)))

    def leaves(self) -> tuple[Switch, ...]:
        """Switches with at least one CA partner, by name (worked out once)."""
        return self._leaves

    @cached_property
    def _uplinks(self) -> dict[str, tuple[Uplink, ...]]:
        return {
            guid: tuple(
                Uplink(self.port_of(self.switches[guid], port, far), far)
                for port, far in ends
                if far is not None
            )
            for guid, ends in self.far_ends.items()
        }

    def uplinks(self, leaf: Switch) -> tuple[Uplink, ...]:
        """The leaf's ports linked to other switches, by port (a port without a partner is in
        `unlinked`: which of those should be an uplink, the uplink check infers)."""
        return self._uplinks.get(leaf.guid, ())

    def port_of(self, sw: Switch, port: int, far: SwitchPort) -> SwitchPort:
        """The near end of a switch-to-switch link (same width and speed as the far end's)."""
        return SwitchPort(sw, port, far.width, far.speed)

    def switch_port(self, name: str, port: int) -> SwitchPort | None:
        """The named switch's port as discovered (with a partner or not), if the switch is."""
        for sw in self.by_name.get(name, ()):
            far = self.switch_links.get((sw.guid, port))
            if far is not None:
                return self.port_of(sw, port, far)
            if (sw.guid, port) in self.unlinked:
                return self.unlinked[(sw.guid, port)]
            ca = self.ca_at.get((sw.guid, port))
            if ca is not None:
                return self.ca_ports[ca]
        return None

    def ca_on(self, name: str, port: int) -> str | None:
        """The CA port GUID cabled to the named switch's port, if one is."""
        for sw in self.by_name.get(name, ()):
            ca = self.ca_at.get((sw.guid, port))
            if ca is not None:
                return ca
        return None


def _add(
    line: PortLine,
    switches: dict[str, Switch],
    ca_ports: dict[str, SwitchPort],
    ca_names: dict[str, str],
    links: dict[tuple[str, int], SwitchPort],
    unlinked: dict[tuple[str, int], SwitchPort],
) -> None:
    loc, rem = line.local, line.remote
    if loc.kind == "SW":
        sw = switches[loc.guid]
        if rem is None:
            unlinked[(sw.guid, loc.port)] = SwitchPort(sw, loc.port, line.width, line.speed)
        elif rem.kind == "SW":
            far = switches[rem.guid]
            links[(sw.guid, loc.port)] = SwitchPort(far, rem.port, line.width, line.speed)
        else:  # the switch side of a node's cable: its width and speed win
            ca_ports[rem.guid] = SwitchPort(sw, loc.port, line.width, line.speed)
            ca_names[rem.guid] = rem.description.strip()
    elif rem is not None and rem.kind == "SW":
        ca_names.setdefault(loc.guid, loc.description.strip())
        if loc.guid not in ca_ports:
            ca_ports[loc.guid] = SwitchPort(switches[rem.guid], rem.port, line.width, line.speed)
