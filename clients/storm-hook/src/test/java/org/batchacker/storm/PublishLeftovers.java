package org.batchacker.storm;

import java.nio.file.Paths;

/**
 * Opens the hook's files for a prefix in a folder, as an acker task that starts again does,
 * and closes them: what a dead worker left hidden there is published with its whole lines.
 *
 * <p>Usage: {@code PublishLeftovers FOLDER PREFIX}.
 */
public final class PublishLeftovers {
    private PublishLeftovers() {}

    public static void main(String[] args) {
        new RollingJsonLines(Paths.get(args[0]), args[1], 1 << 20, 60_000).close();
    }
}
