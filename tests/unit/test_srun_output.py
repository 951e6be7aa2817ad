"""Routing `srun --label` output to each task's node, byte-exact (transport.srun_output)."""

from __future__ import annotations

from nodegate.transport.srun_output import SRUN_LINE_MAX, LabelledStream, route_labelled

NODES = ["gpu001", "gpu002", "gpu003"]


def test_lines_go_to_the_task_srun_labelled_them_with():
    out = b"1: b1\n0: a1\n2: c1\n0: a2\n"
    assert route_labelled(out, NODES, 1000) == {
        "gpu001": b"a1\na2\n",
        "gpu002": b"b1\n",
        "gpu003": b"c1\n",
    }


def test_a_node_printing_another_nodes_label_only_adds_to_its_own_bytes():
    # gpu002 (task 1) prints "0: forged" and "2: forged" lines: srun labels them as task 1's.
    out = b"0: real\n1: 0: forged\n1: 2: @@nonce F x 0 1 2 0 0 -\n2: mine\n"
    assert route_labelled(out, NODES, 1000) == {
        "gpu001": b"real\n",
        "gpu002": b"0: forged\n2: @@nonce F x 0 1 2 0 0 -\n",
        "gpu003": b"mine\n",
    }


def test_srun_pieces_of_a_long_line_are_joined_without_srun_s_newlines():
    line = b"y" * (2 * SRUN_LINE_MAX + 10)
    # slurmstepd sends SRUN_LINE_MAX bytes at a time; srun ends each piece with a newline
    pieces = [line[i : i + SRUN_LINE_MAX] for i in range(0, len(line), SRUN_LINE_MAX)]
    out = b"".join(b"0: " + p + b"\n" for p in pieces) + b"1: short\n"
    assert route_labelled(out, NODES[:2], 10**6) == {"gpu001": line + b"\n", "gpu002": b"short\n"}


def test_a_line_of_exactly_the_piece_size_keeps_its_newline():
    body = b"z" * SRUN_LINE_MAX  # + its newline: one full piece, then the newline alone
    out = b"0: " + body + b"\n0: \n"
    assert route_labelled(out, NODES[:1], 10**6) == {"gpu001": body + b"\n"}


def test_wide_labels_chunked_input_and_a_last_line_without_newline():
    s = LabelledStream(12, 1000)
    for chunk in (b" 0: ab", b"c\n11: x\n 1", b": tail"):
        s.feed(chunk)
    s.close()
    assert (s.of(0), s.of(11), s.of(1)) == (b"abc\n", b"x\n", b"tail")


def test_unlabelled_lines_and_unknown_tasks_are_srun_s_own_never_a_node_s():
    out = b"srun: error: gpu002: task 1: Exited\n7: not a task of this step\n0: ok\n"
    s = LabelledStream(2, 1000)
    s.feed(out)
    s.close()
    assert s.stray == ["srun: error: gpu002: task 1: Exited", "7: not a task of this step"]
    assert (s.of(0), s.of(1)) == (b"ok\n", b"")


def test_a_flooding_task_is_cut_at_the_cap_and_the_others_are_unaffected():
    out = b"".join(b"0: " + b"f" * 99 + b"\n" for _ in range(50)) + b"1: fine\n"
    s = LabelledStream(2, 1000)
    s.feed(out)
    s.close()
    assert len(s.of(0)) == 1001 and s.flooded(0)
    assert s.of(1) == b"fine\n" and not s.flooded(1)


def test_base64_lines_survive_every_split_and_newline_srun_adds() -> None:
    import base64

    data = b"x" * 5000 + b"\n" + bytes(range(256)) + b"@@nonce B id\n"
    text = base64.encodebytes(data)  # 76-character lines, as `base64 -w 76`
    # srun may cut a line anywhere (a full buffer) and end each piece with its own newline.
    pieces = [ln[i : i + 50] for ln in text.split(b"\n") for i in range(0, max(len(ln), 1), 50)]
    output = b"".join(b"0: " + p + b"\n" for p in pieces)
    other = b"1: " + base64.encodebytes(b"other node\n").rstrip(b"\n") + b"\n"
    stream = LabelledStream(2, 1 << 20, b64=True)
    cut = output.index(b"\n", 1000) + 1  # srun writes whole labelled lines; chunks cut anywhere
    stream.feed(output[:700])
    stream.feed(output[700:cut])
    stream.feed(other)
    stream.feed(output[cut:])
    stream.close()
    assert (stream.of(0), stream.of(1)) == (data, b"other node\n")
    assert not stream.flooded(0)


def test_base64_stream_over_its_cap_is_a_flood() -> None:
    import base64

    stream = LabelledStream(1, 100, b64=True)
    stream.feed(b"".join(b"0: " + ln + b"\n" for ln in base64.encodebytes(b"y" * 400).split()))
    stream.close()
    assert stream.flooded(0) and len(stream.of(0)) > 100
