"""The one conversion point between core types and ROS 2 messages.

``factory`` looks classes up (rosbags definitions or rclpy's generated
classes); ``common`` and the per-area modules build and read messages.
"""

from shape_sensing.messages.errors import MessageError
from shape_sensing.messages.factory import DISTROS, PUBLISHED_TYPES, MessageFactory, default_factory, published_type

__all__ = ["DISTROS", "PUBLISHED_TYPES", "MessageError", "MessageFactory", "default_factory", "published_type"]
