"""pip install of shape_sensing without ROS 2 (the ROS 2 build is CMakeLists.txt: ament_cmake + rosidl).

Console scripts are declared once, in setup.cfg's [options.entry_points], for both routes; ``NODES`` below is the
table of node executables that the launch-file checks read (test/test_packaging.py checks setup.cfg against it).
"""

import re
from glob import glob
from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = "shape_sensing"
# the version is kept once, in shape_sensing/__init__.py (package.xml must agree: test/test_packaging.py)
_INIT = (Path(__file__).parent / PACKAGE / "__init__.py").read_text()
VERSION = re.search(r'__version__ = "([^"]+)"', _INIT).group(1)  # type: ignore[union-attr]

# One console_scripts entry per rclpy node: executable name -> module under shape_sensing.nodes.
NODES = {
    "hinge_arc_estimator": "hinge_arc_estimator",
    "vine_imu_simulator": "vine_imu_simulator",
    "wt901": "wt901",
    "rigid_module_estimator": "rigid_module_estimator",
    "hyper_redundant_simulator": "hyper_redundant_simulator",
    "bno055_chain": "bno055_chain",
    "continuum_estimator": "continuum_estimator",
    "growth_planner": "growth_planner",
    "tof_ring": "tof_ring",
    "base_station": "base_station",
    "contact_cap": "contact_cap",
    "netft": "netft",
    "collision_pivot_estimator": "collision_pivot_estimator",
    "vine_collision_simulator": "vine_collision_simulator",
}

setup(
    name=PACKAGE,
    version=VERSION,
    packages=find_packages(exclude=["test", "test.*", "benchmarks"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml", "README.md", "CHANGELOG.rst", "LICENSE"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.launch.xml") + glob("launch/*.launch.py")),
        (f"share/{PACKAGE}/config", glob("config/*.yaml")),
        (f"share/{PACKAGE}/rviz", glob("rviz/*.rviz")),
        (f"share/{PACKAGE}/msg", glob("msg/*.msg")),
    ],
    python_requires=">=3.11",
    # Ranges tested: the low end on Debian 12's python3-numpy/scipy/matplotlib (the ROS stage of .ci/run), the
    # high end on requirements.txt's pins (make test). Ubuntu 24.04 (Jazzy) ships numpy 1.26, scipy 1.11.
    install_requires=[
        "numpy>=1.24,<3",
        "scipy>=1.10,<2",
        "matplotlib>=3.6,<4",
        "PyYAML>=6.0,<7",
        "threadpoolctl>=3.1,<4",
        "rosbags>=0.11.9,<0.12",
        "mcap>=1.6,<2",
        "trimesh>=5.2,<6",
        "tqdm>=4.64,<5",
    ],
    extras_require={
        # drivers on real buses and their simulated twins (smbus2 I2C, pyserial pty, python-can virtual bus)
        # and ST's VL53L5CX firmware image, shipped in SparkFun's package (read as data)
        "hardware": ["python-can>=4.1,<5", "pyserial>=3.5,<4", "smbus2>=0.4.2,<0.7", "sparkfun-qwiic-vl53l5cx>=2.0,<3"],
        "test": [
            "pytest>=7.2", "hypothesis>=6.67", "easydubins>=1.3.1,<2", "mcap-ros2-support>=0.6,<0.7",
            # oracles: independent implementations read our simulated BNO055 chain and WT901 stream (tested:
            # bno055 5.4.22, tca9548a 0.8.6, busdevice 5.2.17, register 1.13.0, Blinka 10.0.0, witmotion 0.0.1.dev0)
            "adafruit-circuitpython-bno055>=5.4,<6", "adafruit-circuitpython-tca9548a>=0.8,<0.9",
            "adafruit-circuitpython-busdevice>=5.2,<6", "adafruit-circuitpython-register>=1.13,<2",
            "Adafruit-Blinka>=10,<11", "witmotion==0.0.1.dev0",
            # oracle: PyPI's port of ST's VL53L5CX ULD boots and ranges on our simulated chip (tested 1.0.1)
            "vl53l5cx>=1.0.1,<1.1",
        ],
        # the physical simulator of the ToF continuum robot (sim/tof_mujoco.py, demo tof-continuum --sim mujoco);
        # optional: ~100 MB installed with its viewer's dependencies, not needed on a robot. Tested 4.0.0
        "sim": ["mujoco>=4.0,<5"],
    },
    zip_safe=False,
    maintainer="shape_sensing maintainers",
    maintainer_email="maintainers@shape-sensing.invalid",
    description="Live shape sensing of continuum robots: drivers, estimators, TF, markers and bags.",
    license="Apache-2.0",
)
