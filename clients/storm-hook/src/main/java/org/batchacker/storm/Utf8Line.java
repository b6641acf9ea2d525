package org.batchacker.storm;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/** One JSON line built as UTF-8 bytes in a buffer that is reused from row to row. */
final class Utf8Line {
    private byte[] bytes = new byte[256];
    private int length;

    Utf8Line clear() {
        length = 0;
        return this;
    }

    /** Text known to be ASCII with nothing to escape: keys, punctuation, numbers, times. */
    Utf8Line ascii(String text) {
        int size = text.length();
        room(size);
        for (int i = 0; i < size; i++) {
            bytes[length++] = (byte) text.charAt(i);
        }
        return this;
    }

    Utf8Line number(long value) {
        return ascii(Long.toString(value));
    }

    /** Any text as a JSON string: quoted, escaped, UTF-8. */
    Utf8Line quoted(String text) {
        StringBuilder escaped = null;
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c == '"' || c == '\\' || c < 0x20 || c > 0x7e) {
                escaped = new StringBuilder(text.length() + 8);
                break;
            }
        }
        if (escaped == null) {
            return ascii("\"").ascii(text).ascii("\"");
        }
        escaped.append('"');
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c == '"' || c == '\\') {
                escaped.append('\\').append(c);
            } else if (c < 0x20) {
                escaped.append(String.format("\\u%04x", (int) c));
            } else {
                escaped.append(c);
            }
        }
        byte[] encoded = escaped.append('"').toString().getBytes(StandardCharsets.UTF_8);
        room(encoded.length);
        System.arraycopy(encoded, 0, bytes, length, encoded.length);
        length += encoded.length;
        return this;
    }

    int length() {
        return length;
    }

    void writeTo(OutputStream out) throws IOException {
        out.write(bytes, 0, length);
    }

    private void room(int more) {
        if (length + more > bytes.length) {
            bytes = Arrays.copyOf(bytes, Math.max(bytes.length * 2, length + more));
        }
    }
}
