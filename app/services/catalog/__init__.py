"""The models Hearth knows and installs: the catalog with each model's facts and fit, and installs."""
