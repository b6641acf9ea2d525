package org.batchacker.storm;

import java.io.BufferedOutputStream;
import java.io.Closeable;
import java.io.IOException;
import java.io.OutputStream;
import java.io.RandomAccessFile;
import java.io.UncheckedIOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;

/**
 * JSON Lines written to a hidden file that is renamed into place once closed, so a reader of
 * the folder (`acker ingest`, which skips names starting with "." or "_") never sees a
 * half-written file. A file is closed when it reaches {@code rollBytes} or {@code rollMillis}
 * after its first line. Lines are buffered: nothing is flushed per line.
 */
final class RollingJsonLines implements Closeable {
    private static final String IN_PROGRESS = ".inprogress";
    private static final DateTimeFormatter STAMP =
        DateTimeFormatter.ofPattern("yyyyMMdd'T'HHmmssSSS").withZone(ZoneOffset.UTC);

    private final Path folder;
    private final String prefix;
    private final long rollBytes;
    private final long rollMillis;
    private OutputStream writer;
    private Path current;
    private long bytes;
    private long openedAt;
    private int sequence;

    RollingJsonLines(Path folder, String prefix, long rollBytes, long rollMillis) {
        this.folder = folder;
        this.prefix = prefix;
        this.rollBytes = rollBytes;
        this.rollMillis = rollMillis;
        try {
            Files.createDirectories(folder);
            recoverLeftovers();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot prepare " + folder, e);
        }
    }

    /** Append one line (UTF-8, without its newline); close the file first if it is due. */
    synchronized void write(Utf8Line line, long nowMillis) {
        rollIfDue(nowMillis);
        try {
            if (writer == null) {
                open(nowMillis);
            }
            line.writeTo(writer);
            writer.write('\n');
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write " + current, e);
        }
        bytes += line.length() + 1;
    }

    /** Close the open file if it is old or large enough; called on every line and every tick. */
    synchronized void rollIfDue(long nowMillis) {
        if (writer != null && (bytes >= rollBytes || nowMillis - openedAt >= rollMillis)) {
            closeCurrent();
        }
    }

    @Override
    public synchronized void close() {
        if (writer != null) {
            closeCurrent();
        }
    }

    private void open(long nowMillis) throws IOException {
        sequence++;
        String name = prefix + "-" + STAMP.format(Instant.ofEpochMilli(nowMillis)) + "-" + sequence;
        current = folder.resolve("." + name + ".jsonl" + IN_PROGRESS);
        writer = new BufferedOutputStream(Files.newOutputStream(current), 1 << 16);
        bytes = 0;
        openedAt = nowMillis;
    }

    private void closeCurrent() {
        try {
            writer.close();
            publish(current);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot close " + current, e);
        } finally {
            writer = null;
            current = null;
        }
    }

    /** A worker that died left its open file hidden: keep its whole lines and publish it. */
    private void recoverLeftovers() throws IOException {
        try (DirectoryStream<Path> left = Files.newDirectoryStream(folder, "." + prefix + "-*" + IN_PROGRESS)) {
            for (Path file : left) {
                truncateToLastLine(file);
                publish(file);
            }
        }
    }

    private static void truncateToLastLine(Path file) throws IOException {
        try (RandomAccessFile data = new RandomAccessFile(file.toFile(), "rw")) {
            long end = data.length();
            while (end > 0) {
                data.seek(end - 1);
                if (data.read() == '\n') {
                    break;
                }
                end--;
            }
            data.setLength(end);
        }
    }

    private static void publish(Path hidden) throws IOException {
        if (Files.size(hidden) == 0) {
            Files.delete(hidden);
            return;
        }
        String name = hidden.getFileName().toString();
        String visible = name.substring(1, name.length() - IN_PROGRESS.length());
        Files.move(hidden, hidden.resolveSibling(visible), StandardCopyOption.ATOMIC_MOVE);
    }
}
