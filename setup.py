"""ament_python build of shape_sensing (also pip-installable without ROS 2)."""

from glob import glob

from setuptools import find_packages, setup

PACKAGE = "shape_sensing"

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
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*", "benchmarks"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml", "README.md", "CHANGELOG.rst"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.launch.xml") + glob("launch/*.launch.py")),
        (f"share/{PACKAGE}/config", glob("config/*.yaml")),
        (f"share/{PACKAGE}/rviz", glob("rviz/*.rviz")),
        (f"share/{PACKAGE}/msg", glob("msg/*.msg")),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="shape_sensing maintainers",
    maintainer_email="maintainers@shape-sensing.invalid",
    description="Live shape sensing of continuum robots: drivers, estimators, TF, markers and bags.",
    license="Apache-2.0",
    tests_require=["pytest"],
    entry_points={
        "console_scripts": [f"{name} = {PACKAGE}.nodes.{module}:main" for name, module in NODES.items()]
        + ["shape-sensing = shape_sensing.cli:main"],
    },
)
