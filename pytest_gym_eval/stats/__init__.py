"""The statistics: confidence intervals, CI gates, sequential (anytime-valid) gates, paired comparisons and power."""
