"""portscope.profiler"""
