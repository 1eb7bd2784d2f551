"""Who may read and change what: the team and visibility rules of the API.

- An admin key reads and changes everything.
- A submitter key reads and changes its team's submissions (a key without a team, made
  before teams existed: its own), and reads public submissions of other teams.
- Anything else is answered like an unknown id (404), so ids of other teams' private
  submissions cannot be probed.
"""

from __future__ import annotations

from service.store import ApiKeyRecord, SubmissionRecord

__all__ = ["can_change", "can_read", "team_scope"]


def team_scope(key: ApiKeyRecord) -> str:
    """The unit of sharing and quotas: the key's team, or the key itself without one."""
    return key.team if key.team is not None else key.key_id


def _same_team(key: ApiKeyRecord, record: SubmissionRecord) -> bool:
    if key.team is not None:
        return record.team == key.team
    return record.team is None and record.owner == key.key_id


def can_change(key: ApiKeyRecord, record: SubmissionRecord) -> bool:
    """Delete, cancel or change the visibility: admins and the submission's team."""
    return key.role == "admin" or _same_team(key, record)


def can_read(key: ApiKeyRecord, record: SubmissionRecord) -> bool:
    """Read: admins, the submission's team, and every key for a public submission."""
    return can_change(key, record) or record.visibility == "public"
