"""RViz launch tests' machinery: a launch file started with ``rviz:=true`` under a virtual X server, judged by
what RViz logged and by a screenshot of its window (``test/test_rviz.py``).

One :func:`run_scene` per launch file:

1. an Xvfb display of :data:`SCREEN` (Mesa's software OpenGL renders RViz), ``ROS_LOG_DIR`` a fresh directory,
   so RViz's own log file (``rviz2_<pid>_*.log``, every line it logs, whatever the launch file's ``output``)
   can be read afterwards;
2. ``ros2 launch shape_sensing FILE rviz:=true ARGS`` in its own process group, and the scene's feeders (a
   simulator node, ``ros2 bag play`` of a demo bag, or messages the test publishes);
3. a probe node in the test subscribes to the topics the config displays and keeps their latest messages and
   tf; once every one has arrived and the scene has run :attr:`Scene.settle_s` more seconds, the root window is
   photographed (ImageMagick ``import``) and the geometry of the same moment is kept;
4. SIGINT to the launch's process group (then SIGKILL: rviz2 may crash on shutdown, upstream ros2/rviz#1858; the
   test judges what RViz showed and logged, not how it exited).

The judgement (:func:`judge`):

* RViz's log: no line at WARN or ERROR, none of :data:`LOG_PROBLEMS` ("Message Filter dropping message",
  "Negative eigenvalue", an incompatible-QoS publisher, an invalid marker, ...);
* the Displays panel: no display's name and not the Global Status in RViz's warning or error text colours
  (RViz colours a display's name (192, 128, 0) for a warning and (192, 32, 32) for an error: a fixed frame that
  does not exist, "No tf data", a topic of another type, a transform missing, a marker it cannot show);
* the 3D view: each :class:`Element` (the robot's body, the estimate, the truth, the covariance ellipsoid, the
  point clouds, the frames) projected with the config's Orbit camera (focal point, distance, yaw, pitch; OGRE's
  45 degree vertical field of view; the render panel found as the rectangle of the config's background colour)
  covers at least :attr:`Element.min_pixels` pixels of its colour (hue and saturation, so lit and blended
  surfaces count) within :attr:`Element.radius_px` of where the geometry of the newest messages, or of those of
  the :data:`LAG_S` before (RViz renders a few frames per second on software OpenGL), predicts it, and, for an
  element whose colour is its own in the scene, most of that colour's pixels lie there.

Nothing here imports ROS at module level; :data:`AVAILABLE` / :data:`REASON` say whether the RViz tests can run
(ROS 2 sourced and the package built, ``rviz2``, ``Xvfb`` and ImageMagick's ``import`` present).
"""

from __future__ import annotations

import colorsys
import contextlib
import itertools
import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import launch_harness as h
import numpy as np
import yaml

SCREEN = (1600, 1000)  # Xvfb screen, pixels; every config's window is 1400 x 900 at (60, 60)
FOV_Y = math.pi / 4  # OGRE's default vertical field of view, which RViz's Orbit view keeps
WARN_RGB = (192, 128, 0)  # rviz_common::properties::StatusProperty::statusColor(Warn)
ERROR_RGB = (192, 32, 32)  # ... (Error)
OK_DISPLAY_RGB = (40, 120, 197)  # an enabled display's name without a problem
#: log lines RViz (or rclcpp in it) writes for a display that cannot show its data, whatever their severity
LOG_PROBLEMS = (
    "Message Filter dropping message",
    "Negative eigenvalue",
    "incompatible QoS",
    "offering incompatible",
    "requesting incompatible",
    "No tf data",
    "does not exist",
    "Could not transform",
    "Invalid",
    "invalid",
    "Error",
    "error",
    "Scale of 0",
    "Unknown marker",
)
LAG_S = 1.0  # s: an element may be drawn where its geometry was up to this long before the screenshot
ARTEFACTS = Path(os.environ.get("SHAPE_SENSING_RVIZ_ARTEFACTS") or Path(__file__).resolve().parents[1] / "out" / "rviz")


def _probe() -> tuple[bool, str]:
    if not h.AVAILABLE:
        return False, h.REASON
    if shutil.which("rviz2") is None:
        return False, "rviz2 is not installed in the sourced ROS 2 (../shared/ros2/install-rviz.sh)"
    for tool in ("Xvfb", "import"):
        if shutil.which(tool) is None:
            return False, f"{tool} is not installed (apt-get install xvfb imagemagick)"
    return True, ""


AVAILABLE, REASON = _probe()
REQUIRED = os.environ.get("SHAPE_SENSING_REQUIRE_RVIZ", "") not in ("", "0")
DOCS = Path(os.environ["SHAPE_SENSING_RVIZ_DOCS"]) if os.environ.get("SHAPE_SENSING_RVIZ_DOCS") else None
SKIP = os.environ.get("SHAPE_SENSING_SKIP_RVIZ", "")  # a reason to skip them (scripts/test_ros.sh's second pass)


# -- the scene -------------------------------------------------------------------------------------------------------


@dataclass
class Element:
    """Something the config draws, where the scene's messages put it.

    ``points`` maps the probe's latest messages (topic -> message) and a ``to_fixed(frame, xyz)`` transform to
    ``(N, 3)`` points in the fixed frame (or ``None`` while it cannot say). ``rgb`` is the colour drawn (after the
    display's alpha over the background); ``(255, 255, 255)`` matches white and near-white only.
    """

    name: str
    rgb: tuple[int, int, int]
    points: Callable[[dict[str, Any], Callable[[str, np.ndarray], np.ndarray]], np.ndarray | None]
    min_pixels: int = 40
    radius_px: float = 14.0
    own_colour: bool = False  # most pixels of this colour in the view belong to this element
    polyline: bool = True  # the points are one line (look along it), else separate points / segments
    filled: bool = False  # a solid: its region is the convex hull of the projected points (e.g. an ellipsoid)
    #: a solid smaller than this on screen (the square root of its projected area, pixels) cannot be told apart
    #: (e.g. a 2-sigma ellipsoid of millimetres seen from 2 m, or a flat one seen edge-on): reported, not judged
    resolvable_px: float = 0.0
    hue_tol_deg: float = 14.0
    #: a solid (first point its centre) reaching no further than this from its centre lies inside the robot's body
    #: (e.g. the vine's tip ellipsoid inside its 12.9 cm tube, hidden by the tube's end): reported, not judged
    inside_body_m: float = 0.0
    rgb_alt: tuple[int, int, int] | None = None  # also counts: e.g. the colour seen through a translucent body


#: an Element colour meaning any saturated colour (a cloud coloured by a channel through a rainbow)
ANY_HUE = (-1, -1, -1)


@dataclass
class Scene:
    """One launch file with RViz and what its screenshot must show."""

    name: str  # screenshot name, e.g. vine_imu_sim
    launch_file: str
    rviz_config: str  # rviz/<name>.rviz, read for the camera and fixed frame
    arguments: dict[str, str] = field(default_factory=dict)
    topics: dict[str, str] = field(default_factory=dict)  # topic -> type the probe keeps (the latest message)
    latched: tuple[str, ...] = ()  # topics among them published transient local
    elements: list[Element] = field(default_factory=list)
    feeders: list[list[str]] = field(default_factory=list)  # extra commands started beside the launch
    feed: Callable[[Any], Any] | None = None  # feed(probe) -> object kept alive while the scene runs
    prepare: Callable[[], dict[str, str]] | None = None  # before the launch: makes inputs, returns more arguments
    settle_s: float = 8.0  # seconds after every topic arrived (and ``ready``)
    ready: Callable[[dict[str, Any]], bool] | None = None  # the scene is far enough along (latest messages)
    timeout_s: float = 60.0  # for every topic to arrive
    robot_kind: str = ""  # docs/images/rviz_<robot_kind>.png: the picture of this robot kind
    #: RViz log lines this scene expects (substrings), e.g. the one reset when a bag's /clock starts
    expected_log: tuple[str, ...] = ()


@dataclass
class Result:
    scene: Scene
    screenshot: Path
    rviz_log: list[str]
    launch_log: str
    image: np.ndarray  # (H, W, 3) uint8
    messages: dict[str, Any]
    points: dict[str, list[np.ndarray]]  # per element: its points at each moment of the last LAG_S seconds
    seconds: float


# -- the camera ------------------------------------------------------------------------------------------------------


@dataclass
class OrbitCamera:
    focal: np.ndarray
    distance: float
    yaw: float
    pitch: float
    fixed_frame: str
    background: tuple[int, int, int]

    @classmethod
    def from_config(cls, path: Path) -> OrbitCamera:
        cfg = yaml.safe_load(path.read_text())
        vm = cfg["Visualization Manager"]
        view = vm["Views"]["Current"]
        if view.get("Class") != "rviz_default_plugins/Orbit":
            raise ValueError(f"{path}: the current view is {view.get('Class')}, expected rviz_default_plugins/Orbit")
        if view.get("Target Frame", "<Fixed Frame>") != "<Fixed Frame>":
            raise ValueError(f"{path}: the view's target frame must be <Fixed Frame>")
        fp = view["Focal Point"]
        bg = vm["Global Options"].get("Background Color", "48; 48; 48")
        return cls(
            focal=np.array([fp["X"], fp["Y"], fp["Z"]], dtype=float),
            distance=float(view["Distance"]),
            yaw=float(view["Yaw"]),
            pitch=float(view["Pitch"]),
            fixed_frame=str(vm["Global Options"]["Fixed Frame"]),
            background=tuple(int(v) for v in str(bg).split(";")),  # type: ignore[arg-type]
        )

    def eye(self) -> np.ndarray:
        cy, sy, cp, sp = math.cos(self.yaw), math.sin(self.yaw), math.cos(self.pitch), math.sin(self.pitch)
        return self.focal + self.distance * np.array([cy * cp, sy * cp, sp])

    def project(self, xyz: np.ndarray, panel: tuple[int, int, int, int]) -> np.ndarray:
        """Pixel (column, row) in the screenshot of points ``(N, 3)`` of the fixed frame; NaN behind the camera.

        ``panel``: the render panel's (left, top, width, height) in the screenshot.
        """
        x0, y0, w, h_ = panel
        eye = self.eye()
        fwd = self.focal - eye
        fwd /= np.linalg.norm(fwd)
        right = np.cross(fwd, [0.0, 0.0, 1.0])
        right /= np.linalg.norm(right)
        up = np.cross(right, fwd)
        v = np.atleast_2d(xyz) - eye
        depth = v @ fwd
        t = math.tan(FOV_Y / 2)
        with np.errstate(divide="ignore", invalid="ignore"):
            xn = (v @ right) / depth / (t * w / h_)
            yn = (v @ up) / depth / t
        px = np.stack([x0 + (xn + 1) * w / 2, y0 + (1 - yn) * h_ / 2], axis=1)
        px[depth <= 0.01] = np.nan
        return px


def render_panel(image: np.ndarray, background: Sequence[int]) -> tuple[int, int, int, int]:
    """(left, top, width, height) of RViz's 3D view: the columns and rows mostly of the background colour."""
    bg = np.all(image == np.asarray(background, dtype=np.uint8), axis=2)
    cols = np.flatnonzero(bg.mean(axis=0) > 0.25)
    rows = np.flatnonzero(bg.mean(axis=1) > 0.25)
    if cols.size < 100 or rows.size < 100:
        raise AssertionError(f"no render panel of background colour {tuple(background)} in the screenshot")
    return int(cols[0]), int(rows[0]), int(cols[-1] - cols[0] + 1), int(rows[-1] - rows[0] + 1)


# -- colours ---------------------------------------------------------------------------------------------------------


def colour_mask(image: np.ndarray, rgb: Sequence[int], hue_tol_deg: float = 18.0) -> np.ndarray:
    """Pixels drawn in colour ``rgb``: same hue (within ``hue_tol_deg``) and about its saturation, at any
    brightness above dark (lighting shades a surface); white and greys match by lightness and low saturation."""
    img = image.astype(float) / 255.0
    mx, mn = img.max(axis=2), img.min(axis=2)
    sat = np.where(mx > 0, (mx - mn) / np.maximum(mx, 1e-9), 0.0)
    if tuple(rgb) == ANY_HUE:
        return (sat > 0.5) & (mx > 0.3)
    h_ref, s_ref, v_ref = colorsys.rgb_to_hsv(*(c / 255.0 for c in rgb))
    if s_ref < 0.2:  # white / grey: lightness near the colour's, little chroma
        return (sat < 0.15) & (np.abs(mx - v_ref) < 0.12)
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    d = np.maximum(mx - mn, 1e-9)
    hue = np.where(mx == r, ((g - b) / d) % 6, np.where(mx == g, (b - r) / d + 2, (r - g) / d + 4)) / 6.0
    dh = np.abs(hue - h_ref)
    dh = np.minimum(dh, 1 - dh) * 360.0
    return (dh < hue_tol_deg) & (sat > max(0.25, 0.45 * s_ref)) & (mx > 0.15)


def blend(rgb: Sequence[int], alpha: float, background: Sequence[int] = (48, 48, 48)) -> tuple[int, int, int]:
    """``rgb`` drawn with ``alpha`` over ``background``."""
    r, g, b = (round(alpha * c + (1 - alpha) * bg) for c, bg in zip(rgb, background, strict=True))
    return r, g, b


def _densify(px: np.ndarray, step: float = 3.0) -> np.ndarray:
    """Points along a polyline of pixels every ``step`` pixels (so a line's whole length is looked at)."""
    out = [px[:1]]
    for a, b in itertools.pairwise(px):
        n = max(1, int(np.linalg.norm(b - a) // step))
        out.append(a + (b - a) * (np.arange(1, n + 1)[:, None] / n))
    return np.concatenate(out)


def region(shape: tuple[int, int], px: np.ndarray, radius: float, polyline: bool = True) -> np.ndarray:
    """Boolean image of the pixels within ``radius`` of the points ``px`` (of the polyline through them)."""
    px = px[np.all(np.isfinite(px), axis=1)]
    mask = np.zeros(shape, dtype=bool)
    if px.size == 0:
        return mask
    if polyline and len(px) > 1 and len(px) < 5000:
        px = _densify(px)
    r = math.ceil(radius)
    yy, xx = np.mgrid[-r : r + 1, -r : r + 1]
    disc = (xx**2 + yy**2) <= radius**2
    dy, dx = np.nonzero(disc)
    dy, dx = dy - r, dx - r
    cols = np.round(px[:, 0]).astype(int)
    rows = np.round(px[:, 1]).astype(int)
    keep = (cols > -r) & (cols < shape[1] + r) & (rows > -r) & (rows < shape[0] + r)
    cols, rows = cols[keep], rows[keep]
    if cols.size > 4000:
        pick = np.linspace(0, cols.size - 1, 4000).astype(int)
        cols, rows = cols[pick], rows[pick]
    yy = (rows[:, None] + dy[None, :]).ravel()
    xx = (cols[:, None] + dx[None, :]).ravel()
    ok = (yy >= 0) & (yy < shape[0]) & (xx >= 0) & (xx < shape[1])
    mask[yy[ok], xx[ok]] = True
    return mask


def hull_region(shape: tuple[int, int], px: np.ndarray) -> np.ndarray:
    """Boolean image of the convex hull of the points ``px`` (a projected solid)."""
    from matplotlib.path import Path as Polygon
    from scipy.spatial import ConvexHull, QhullError

    px = px[np.all(np.isfinite(px), axis=1)]
    mask = np.zeros(shape, dtype=bool)
    if len(px) < 3:
        return mask
    try:
        hull = ConvexHull(px)
    except QhullError:  # degenerate (a line): no area
        return mask
    poly = Polygon(px[hull.vertices])
    x0, y0 = np.floor(px.min(axis=0)).astype(int).clip(0)
    x1, y1 = np.ceil(px.max(axis=0)).astype(int)
    x1, y1 = min(x1, shape[1] - 1), min(y1, shape[0] - 1)
    if x1 < x0 or y1 < y0:
        return mask
    yy, xx = np.mgrid[y0 : y1 + 1, x0 : x1 + 1]
    inside = poly.contains_points(np.column_stack([xx.ravel(), yy.ravel()])).reshape(xx.shape)
    mask[y0 : y1 + 1, x0 : x1 + 1] = inside
    return mask


# -- running a scene ---------------------------------------------------------------------------------------------------


class StartWhen:
    """A command started from the probe's executor once ``condition()`` holds (e.g. a bag played once the node
    that reads it is up); stopped with the scene."""

    def __init__(self, probe: Any, condition: Callable[[], bool], cmd: list[str]) -> None:
        self.proc: subprocess.Popen[Any] | None = None
        self.cmd = cmd

        def check() -> None:
            if self.proc is None and condition():
                self.proc = subprocess.Popen(
                    cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
                )
                self.timer.cancel()

        self.timer = probe.node.create_timer(0.2, check)

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)


class Xvfb:
    """A virtual X server on a free display number (``-displayfd``)."""

    def __init__(self, size: tuple[int, int] = SCREEN) -> None:
        r, w = os.pipe()
        self.proc = subprocess.Popen(
            ["Xvfb", "-displayfd", str(w), "-screen", "0", f"{size[0]}x{size[1]}x24", "-nolisten", "tcp"],
            pass_fds=(w,),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(w)
        with os.fdopen(r) as f:
            number = f.readline().strip()
        if not number:
            self.proc.kill()
            raise RuntimeError("Xvfb did not start")
        self.display = f":{number}"

    def screenshot(self, path: Path) -> np.ndarray:
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["import", "-display", self.display, "-window", "root", str(path)], check=True, timeout=60)
        return read_png(path)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def read_png(path: Path) -> np.ndarray:
    import matplotlib.image

    img = matplotlib.image.imread(str(path))
    if img.dtype != np.uint8:
        img = np.round(img * 255).astype(np.uint8)
    return img[..., :3]


WINDOW = (60, 60, 1400, 900)  # x, y, width, height of RViz's window on the screen (every config's Window Geometry)


def save_window(image: np.ndarray, path: Path) -> None:
    """The RViz window of a screenshot as a PNG (``make screenshots``)."""
    import matplotlib.image

    x, y, w, h_ = WINDOW
    path.parent.mkdir(parents=True, exist_ok=True)
    matplotlib.image.imsave(str(path), np.ascontiguousarray(image[y : y + h_, x : x + w]))


def _stop(proc: subprocess.Popen[Any], grace: float = 15.0) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(grace)
    except (subprocess.TimeoutExpired, ProcessLookupError):
        pass
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def _message_class(type_name: str) -> Any:
    from rosidl_runtime_py.utilities import get_message

    return get_message(type_name)


def run_scene(scene: Scene, out_dir: Path = ARTEFACTS) -> Result:
    """Start the scene, photograph it once settled, stop it; the screenshot lands in ``out_dir/NAME.png``."""
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from rclpy.time import Time

    t_start = time.monotonic()
    arguments = dict(scene.arguments)
    if scene.prepare is not None:
        arguments |= scene.prepare()
    camera = OrbitCamera.from_config(h.share("rviz", scene.rviz_config))
    work = Path(tempfile.mkdtemp(prefix=f"rviz_{scene.name}_"))
    log_dir = work / "ros_log"
    log_dir.mkdir()
    env = dict(os.environ, ROS_LOG_DIR=str(log_dir), RCUTILS_COLORIZED_OUTPUT="0", QT_QPA_PLATFORM="xcb")
    env.pop("WAYLAND_DISPLAY", None)
    xvfb = Xvfb()
    env["DISPLAY"] = xvfb.display
    procs: list[subprocess.Popen[Any]] = []
    launch_out = work / "launch.log"
    probe = h.Probe(f"rviz_test_probe_{scene.name}")
    latest: dict[str, Any] = {}
    history: dict[str, list[tuple[float, Any]]] = {}
    keep: list[Any] = []
    try:
        for topic, type_name in scene.topics.items():
            durability = DurabilityPolicy.TRANSIENT_LOCAL if topic in scene.latched else DurabilityPolicy.VOLATILE
            reliability = ReliabilityPolicy.RELIABLE if topic in scene.latched else ReliabilityPolicy.BEST_EFFORT
            qos = QoSProfile(depth=5, durability=durability, reliability=reliability)

            def keep_latest(msg: Any, topic: str = topic) -> None:
                latest[topic] = msg
                now = time.monotonic()
                past = [(t, m) for t, m in history.get(topic, []) if now - t <= LAG_S + 0.5]
                history[topic] = [*past, (now, msg)]

            keep.append(probe.node.create_subscription(_message_class(type_name), topic, keep_latest, qos))
        buffer = probe.tf_buffer()
        args = [f"{k}:={v}" for k, v in {"rviz": "true", **arguments}.items()]
        with launch_out.open("w") as log:
            procs.append(
                subprocess.Popen(
                    ["ros2", "launch", h.PACKAGE, scene.launch_file, *args],
                    env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                )
            )  # fmt: skip
            for cmd in scene.feeders:
                procs.append(
                    subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
                )
        if scene.feed is not None:
            keep.append(scene.feed(probe))
        arrived = probe.spin_until(lambda: all(t in latest for t in scene.topics), timeout=scene.timeout_s)
        if not arrived:
            missing = sorted(set(scene.topics) - set(latest))
            raise AssertionError(
                f"{scene.name}: no message on {missing} within {scene.timeout_s:g} s\n" + _tail(launch_out)
            )
        if scene.ready is not None and not probe.spin_until(lambda: scene.ready(latest), timeout=scene.timeout_s):
            raise AssertionError(f"{scene.name}: the scene did not get ready within {scene.timeout_s:g} s")
        probe.spin_for(scene.settle_s)
        dead = [p.args for p in procs if p.poll() is not None]
        assert not dead, f"{scene.name}: ended before the screenshot: {dead}\n" + _tail(launch_out)

        at_time = [Time()]  # the TF of the moment looked at (latest, or that of an older snapshot)

        def to_fixed(frame: str, xyz: np.ndarray) -> np.ndarray:
            from scipy.spatial.transform import Rotation

            try:
                tf = buffer.lookup_transform(camera.fixed_frame, frame, at_time[0]).transform
            except Exception:  # not buffered at that time: the latest
                tf = buffer.lookup_transform(camera.fixed_frame, frame, Time()).transform
            q, t = tf.rotation, tf.translation
            return Rotation.from_quat([q.x, q.y, q.z, q.w]).apply(np.atleast_2d(xyz)) + [t.x, t.y, t.z]

        messages = dict(latest)  # the geometry of the moment of the screenshot ...
        now, ros_now = time.monotonic(), probe.node.get_clock().now()
        points: dict[str, list[np.ndarray]] = {e.name: [] for e in scene.elements}
        for age in np.linspace(0.0, LAG_S, 5):  # ... and of the LAG_S seconds before (RViz draws at a few fps)
            snapshot = {}
            for topic, past in history.items():
                older = [m for t, m in past if now - t >= age]
                snapshot[topic] = older[-1] if older else past[0][1]
            at_time[0] = Time() if age == 0 else Time(nanoseconds=ros_now.nanoseconds - int(age * 1e9))
            for e in scene.elements:
                pts = e.points(snapshot, to_fixed)
                if pts is not None and len(pts):
                    points[e.name].append(np.asarray(pts, dtype=float))
        shot = out_dir / f"{scene.name}.png"
        image = xvfb.screenshot(shot)
    finally:
        for k in keep:  # a feeder the scene's feed started (e.g. a bag played once the node listens)
            if hasattr(k, "stop"):
                k.stop()
        for p in reversed(procs):
            _stop(p)
        probe.close()
        xvfb.close()
        out_dir.mkdir(parents=True, exist_ok=True)
        rviz_log: list[str] = []
        for f in sorted(log_dir.glob("rviz2_*.log")):
            rviz_log += f.read_text(errors="replace").splitlines()
        (out_dir / f"{scene.name}.rviz.log").write_text("\n".join(rviz_log) + "\n")
        shutil.copy(launch_out, out_dir / f"{scene.name}.launch.log")
    result = Result(
        scene, shot, rviz_log, launch_out.read_text(errors="replace"), image, messages, points,
        time.monotonic() - t_start,
    )  # fmt: skip
    shutil.rmtree(work, ignore_errors=True)
    return result


def _tail(path: Path, n: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:])


# -- judging ---------------------------------------------------------------------------------------------------------


def log_problems(lines: Sequence[str], expected: Sequence[str] = ()) -> list[str]:
    """RViz's log lines at WARN or above, or naming a display problem at any level (but the ``expected``)."""
    bad = []
    for line in lines:
        if any(e in line for e in expected):
            continue
        level = re.match(r"\[(DEBUG|INFO|WARN|ERROR|FATAL)\]", line.strip())
        if (level and level.group(1) in ("WARN", "ERROR", "FATAL")) or any(p in line for p in LOG_PROBLEMS):
            bad.append(line)
    return bad


#: the Displays tree's name column in the screenshot (x from, to; y from, to): the window at (60, 60), 1400 x 900,
#: as every config's Window Geometry places it; the display icons (left of it) and the docks' red close buttons
#: (right of it) are outside
NAME_COLUMN = (104, 270, 140, 490)


def status_rows(image: np.ndarray, panel: tuple[int, int, int, int]) -> dict[str, list[int]]:
    """Rows (screenshot y) of the Displays tree's names, left of the render panel, in RViz's warning, error and
    OK-display text colours."""
    x_from, x_to, y_from, y_to = NAME_COLUMN
    left = np.zeros_like(image, dtype=int)
    left[y_from:y_to, x_from : min(x_to, panel[0])] = image[y_from:y_to, x_from : min(x_to, panel[0])]
    out = {}
    for name, rgb in (("warn", WARN_RGB), ("error", ERROR_RGB), ("ok", OK_DISPLAY_RGB)):
        near = np.abs(left - np.asarray(rgb)).max(axis=2) <= 24
        ys = np.flatnonzero(near.sum(axis=1) >= 2)
        rows: list[int] = []
        for y in ys:  # text rows: runs of adjacent pixel rows
            if rows and y - rows[-1] <= 3:
                continue
            rows.append(int(y))
        out[name] = rows
    return out


@dataclass
class ElementCheck:
    name: str
    inside: int
    total: int
    min_pixels: int
    own_colour: bool
    in_view: bool
    at: tuple[float, float] = (math.nan, math.nan)  # the projected geometry's centre, screenshot pixels
    size_px: float = math.inf  # the projected geometry's size: the square root of its convex hull's area
    resolvable_px: float = 0.0

    @property
    def resolvable(self) -> bool:
        return self.size_px >= self.resolvable_px

    @property
    def ok(self) -> bool:
        if not self.in_view:
            return False
        if not self.resolvable:  # too small to see from this camera: reported, not judged
            return True
        if self.inside < self.min_pixels:
            return False
        return not self.own_colour or self.inside >= 0.5 * self.total

    def __str__(self) -> str:
        share = f", {self.inside / max(self.total, 1):.0%} of its colour in the view" if self.own_colour else ""
        where = "" if self.in_view else " (geometry not in view)"
        if not self.resolvable:
            where += f" (projected size {self.size_px:.1f} px: too small to resolve or inside the body, not judged)"
        at = f" around ({self.at[0]:.0f}, {self.at[1]:.0f})"
        return f"{self.name}: {self.inside} px where predicted{at} (need {self.min_pixels}){share}{where}"


def check_elements(result: Result) -> list[ElementCheck]:
    """Each element's colour where its projected geometry predicts it."""
    camera = OrbitCamera.from_config(h.share("rviz", result.scene.rviz_config))
    panel = render_panel(result.image, camera.background)
    x0, y0, w, h_ = panel
    inside_panel = np.zeros(result.image.shape[:2], dtype=bool)
    inside_panel[y0 : y0 + h_, x0 : x0 + w] = True
    checks = []
    for e in result.scene.elements:
        moments = result.points[e.name]
        if not moments:
            checks.append(ElementCheck(e.name, 0, 0, e.min_pixels, e.own_colour, False))
            continue
        mask = colour_mask(result.image, e.rgb, e.hue_tol_deg)
        if e.rgb_alt is not None:
            mask |= colour_mask(result.image, e.rgb_alt, e.hue_tol_deg)
        mask &= inside_panel
        where = np.zeros_like(mask)
        for pts in moments:  # where it was at any of the moments looked at (RViz may draw a moment late)
            one = camera.project(pts, panel)
            where |= region(mask.shape, one, e.radius_px, polyline=e.polyline)
            if e.filled:
                where |= hull_region(mask.shape, one)
        where &= inside_panel
        px = camera.project(moments[0], panel)  # the newest
        visible = np.all(np.isfinite(px), axis=1) & (px[:, 0] >= x0) & (px[:, 0] < x0 + w)
        visible &= (px[:, 1] >= y0) & (px[:, 1] < y0 + h_)
        checks.append(
            ElementCheck(
                e.name, int((mask & where).sum()), int(mask.sum()), e.min_pixels, e.own_colour,
                bool(visible.mean() >= 0.5), tuple(np.nanmean(px, axis=0).round(0)),
                0.0 if _inside(moments[0], e.inside_body_m) else math.sqrt(float(hull_region(mask.shape, px).sum())),
                e.resolvable_px,
            )
        )  # fmt: skip
    return checks


def _inside(points: np.ndarray, radius: float) -> bool:
    """A solid whose points (the first its centre) all lie within ``radius`` of the centre."""
    return radius > 0 and float(np.linalg.norm(points - points[0], axis=1).max()) <= radius


def judge(result: Result) -> list[str]:
    """Every problem the run showed (empty: RViz showed the scene as the config means it)."""
    problems = [f"RViz log: {line}" for line in log_problems(result.rviz_log, result.scene.expected_log)]
    if not any("OpenGl version" in line or "OpenGL version" in line for line in result.rviz_log):
        problems.append("RViz's log does not show it started (no OpenGL version line): " + str(result.rviz_log[:5]))
    camera = OrbitCamera.from_config(h.share("rviz", result.scene.rviz_config))
    try:
        panel = render_panel(result.image, camera.background)
    except AssertionError as exc:
        return [*problems, str(exc)]
    rows = status_rows(result.image, panel)
    if rows["warn"] or rows["error"]:
        problems.append(
            f"Displays panel: text in RViz's warning colour at rows {rows['warn']}, error colour at rows "
            f"{rows['error']} (enabled displays without a problem at rows {rows['ok']})"
        )
    for c in check_elements(result):
        if not c.ok:
            problems.append(f"3D view: {c}")
    return problems


# -- geometry from messages ----------------------------------------------------------------------------------------


def path_points(
    topic: str, offset: np.ndarray | None = None
) -> Callable[[dict[str, Any], Callable[..., np.ndarray]], np.ndarray | None]:
    """The poses of a nav_msgs/Path (plus the display's ``offset`` in the fixed frame)."""

    def get(msgs: dict[str, Any], to_fixed: Callable[..., np.ndarray]) -> np.ndarray | None:
        m = msgs.get(topic)
        if m is None or not m.poses:
            return None
        xyz = np.array([[p.pose.position.x, p.pose.position.y, p.pose.position.z] for p in m.poses])
        return to_fixed(m.header.frame_id, xyz) + (0.0 if offset is None else offset)

    return get


def pose_point(topic: str, covariance: bool = False) -> Callable[..., np.ndarray | None]:
    """The position of a PoseStamped / PoseWithCovarianceStamped."""

    def get(msgs: dict[str, Any], to_fixed: Callable[..., np.ndarray]) -> np.ndarray | None:
        m = msgs.get(topic)
        if m is None:
            return None
        pose = m.pose.pose if covariance else m.pose
        p = pose.position
        return to_fixed(m.header.frame_id, np.array([[p.x, p.y, p.z]]))

    return get


def cloud_points(topic: str, limit: int = 3000) -> Callable[..., np.ndarray | None]:
    def get(msgs: dict[str, Any], to_fixed: Callable[..., np.ndarray]) -> np.ndarray | None:
        from sensor_msgs_py import point_cloud2

        m = msgs.get(topic)
        if m is None or m.width * m.height == 0:
            return None
        xyz = point_cloud2.read_points_numpy(m, field_names=("x", "y", "z"), skip_nans=True).astype(float)
        if len(xyz) > limit:
            xyz = xyz[np.linspace(0, len(xyz) - 1, limit).astype(int)]
        return to_fixed(m.header.frame_id, xyz)

    return get


def covariance_points(topic: str, n_sigma: float = 2.0) -> Callable[..., np.ndarray | None]:
    """Points on the ``n_sigma`` position ellipsoid of a PoseWithCovarianceStamped (RViz draws the ellipsoid of
    2 * sqrt(eigenvalue) * the display's scale as diameters: the scale-sigma ellipsoid)."""

    def get(msgs: dict[str, Any], to_fixed: Callable[..., np.ndarray]) -> np.ndarray | None:
        m = msgs.get(topic)
        if m is None:
            return None
        p = m.pose.pose.position
        cov = np.asarray(m.pose.covariance, dtype=float).reshape(6, 6)[:3, :3]
        w, v = np.linalg.eigh(0.5 * (cov + cov.T))
        u = np.array([[x, y, z] for x in (-1, 0, 1) for y in (-1, 0, 1) for z in (-1, 0, 1)], dtype=float)
        u = u[np.linalg.norm(u, axis=1) > 0]
        u /= np.linalg.norm(u, axis=1)[:, None]
        local = (u * (n_sigma * np.sqrt(np.clip(w, 0, None)))) @ v.T + [p.x, p.y, p.z]
        return to_fixed(m.header.frame_id, np.vstack([[p.x, p.y, p.z], local]))

    return get


def marker_points(topic: str, ns_suffix: str) -> Callable[..., np.ndarray | None]:
    """Points (or the pose) of the markers of a MarkerArray whose namespace ends with ``ns_suffix``."""

    def get(msgs: dict[str, Any], to_fixed: Callable[..., np.ndarray]) -> np.ndarray | None:
        m = msgs.get(topic)
        if m is None:
            return None
        out = []
        for mk in m.markers:
            if not mk.ns.endswith(ns_suffix) or mk.action != 0:
                continue
            if mk.points:
                local = np.array([[p.x, p.y, p.z] for p in mk.points])
                from scipy.spatial.transform import Rotation

                q = mk.pose.orientation
                rot = Rotation.from_quat([q.x, q.y, q.z, q.w] if (q.x, q.y, q.z, q.w) != (0, 0, 0, 0) else [0, 0, 0, 1])
                local = rot.apply(local) + [mk.pose.position.x, mk.pose.position.y, mk.pose.position.z]
            else:
                local = np.array([[mk.pose.position.x, mk.pose.position.y, mk.pose.position.z]])
            out.append(to_fixed(mk.header.frame_id, local))
        return np.concatenate(out) if out else None

    return get


def frame_origins(frames: Sequence[str]) -> Callable[..., np.ndarray | None]:
    def get(_msgs: dict[str, Any], to_fixed: Callable[..., np.ndarray]) -> np.ndarray | None:
        try:
            return np.concatenate([to_fixed(f, np.zeros((1, 3))) for f in frames])
        except Exception:
            return None

    return get
