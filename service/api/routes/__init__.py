"""One APIRouter per resource: catalogue, submissions, admin keys, health."""
