"""Format modules (FORMAT_MODULE_PATH): how the admin's pages show dates and times."""
