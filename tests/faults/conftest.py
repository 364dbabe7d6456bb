"""Some fault tests drive hubs whose one platform is the recording test chat."""

from tests._support.chat import make_chat_hub, said  # noqa: F401  (fixtures)
