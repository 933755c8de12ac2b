"""The training engine: build_training() makes a run's parts from its options (build.py), TrainLoop runs the steps
and calls the hooks around them (loop.py, hooks.py), Schedule sets lr, momentum and accumulation per iteration
(schedule.py); run.train() puts them together for train.py."""
