"""The change under review: what is proposed, to which object, replacing what."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from validators.objects import Obj, Ref, ref_of


class Operation(StrEnum):
    CREATE = "CREATE"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    CONNECT = "CONNECT"


@dataclass(frozen=True, slots=True)
class Change:
    """One proposed change. ``obj`` is the new object (None on DELETE), ``old`` the stored one."""

    operation: Operation
    obj: Obj | None
    old: Obj | None = None
    dry_run: bool = False
    # Every step of a review names the change's object, some many times (a 20,000-input check asked it
    # ~10 times per input): read off the object once. Objects under review are never changed in place.
    _ref: Ref | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def of(cls, ref: Ref, operation: Operation, obj: Obj | None, old: Obj | None = None, *,
           dry_run: bool = False) -> Change:
        """The change, with its subject's ref already known (``ref`` must be ``ref_of(subject)``): a
        large batch read each object's ref once for its state and its changes."""
        change = cls(operation, obj, old, dry_run)
        object.__setattr__(change, "_ref", ref)
        return change

    @property
    def subject(self) -> Obj:
        """The object the change is about: the new one, or the old one for a DELETE."""
        subject = self.obj if self.obj is not None else self.old
        assert subject is not None, "a Change carries obj or old"
        return subject

    @property
    def ref(self) -> Ref:
        ref = self._ref
        if ref is None:
            ref = ref_of(self.subject)
            object.__setattr__(self, "_ref", ref)
        return ref
