"""The prompt budget's tests send to hubs whose one platform is the recording test chat."""

from tests._support.chat import said  # noqa: F401  (a fixture)
