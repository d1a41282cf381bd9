"""One adapter per external tool (nsys, ncu, torch.profiler): where it is, its version, its argv, its exports."""
