"""Reading a template as data: every read is the caller's own, and always the file's current text."""

from __future__ import annotations

from pathlib import Path

from smgov.cfn_template import load_template

TEMPLATE = """\
Resources:
  Queue:
    Type: AWS::SQS::Queue
    Properties:
      Tags: &tags
        - {Key: team, Value: ml}
  Topic:
    Type: AWS::SNS::Topic
    Properties:
      Tags: *tags
      TopicName: !Sub "${AWS::StackName}-notices"
"""


def test_a_template_changed_by_its_reader_is_read_unchanged_next_time(tmp_path: Path) -> None:
    # Given a template read once and changed by its reader
    path = tmp_path / "template.yaml"
    path.write_text(TEMPLATE)
    first = load_template(path)
    first["Resources"].pop("Queue")
    first["Resources"]["Topic"]["Properties"]["Tags"].append({"Key": "x", "Value": "y"})
    # When it is read again
    again = load_template(path)
    # Then the reader gets the file's content, short tags included
    assert set(again["Resources"]) == {"Queue", "Topic"}
    assert again["Resources"]["Topic"]["Properties"]["TopicName"] == {"Fn::Sub": "${AWS::StackName}-notices"}
    # and an anchor and its alias are still one list, as YAML reads them
    tags = again["Resources"]["Queue"]["Properties"]["Tags"]
    assert tags == [{"Key": "team", "Value": "ml"}]
    assert tags is again["Resources"]["Topic"]["Properties"]["Tags"]


def test_a_template_rewritten_on_disk_is_read_as_it_now_is(tmp_path: Path) -> None:
    # Given a template read once
    path = tmp_path / "template.yaml"
    path.write_text(TEMPLATE)
    assert "Topic" in load_template(path)["Resources"]
    # When the file is rewritten without the topic
    path.write_text(TEMPLATE.split("  Topic:", maxsplit=1)[0])
    # Then the next read has no topic
    assert set(load_template(path)["Resources"]) == {"Queue"}
