"""A plugin module whose import fails."""

raise RuntimeError("trainbus_fake_importerror cannot be imported (deliberately broken)")
