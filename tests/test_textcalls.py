"""The one text tool-call parser (chat client's text mode and the RL rollout):
Hermes JSON and Qwen3-Coder XML blocks, typed XML parameters, malformed blocks."""

from __future__ import annotations

import json

from cuda_agent.env.toolbox import tool_schemas
from cuda_agent.llm.textcalls import parse_text_calls, strip_text_calls

XML = """Let me look first.
<tool_call>
<function=bash>
<parameter=command>
cd kernels && ls
echo "<b>"
</parameter>
<parameter=timeout>
30
</parameter>
</function>
</tool_call>
<tool_call>
<function=edit>
<parameter=path>
k.cu
</parameter>
<parameter=old_string>
a < b
</parameter>
<parameter=new_string>
  a <= b
</parameter>
<parameter=replace_all>
true
</parameter>
</function>
</tool_call>"""


def test_qwen3_coder_xml_calls_with_schema_types():
    calls = parse_text_calls(XML, tool_schemas())
    assert [c.name for c in calls] == ["bash", "edit"] and all(c.error is None for c in calls)
    assert json.loads(calls[0].arguments) == {"command": 'cd kernels && ls\necho "<b>"', "timeout": 30}
    assert json.loads(calls[1].arguments) == {
        "path": "k.cu",
        "old_string": "a < b",
        "new_string": "  a <= b",
        "replace_all": True,
    }
    assert strip_text_calls(XML) == "Let me look first."


def test_without_schemas_xml_values_stay_text():
    calls = parse_text_calls("<tool_call><function=bash><parameter=timeout>30</parameter></function></tool_call>")
    assert json.loads(calls[0].arguments) == {"timeout": "30"}


def test_malformed_xml_calls_say_what_is_wrong():
    calls = parse_text_calls(
        "<tool_call><function=><parameter=x>1</parameter></function></tool_call>"
        "<tool_call><function=bash><parameter=command>ls</parameter>"
    )
    assert "no name" in calls[0].error and calls[0].name == ""
    assert "not closed" in calls[1].error and calls[1].name == "bash"


def test_hermes_and_xml_mixed_in_order():
    text = (
        '<tool_call>{"name": "read", "arguments": {"path": "model.py"}}</tool_call>'
        "<tool_call><function=glob><parameter=pattern>*.cu</parameter></function></tool_call>"
    )
    calls = parse_text_calls(text, tool_schemas())
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("read", {"path": "model.py"}),
        ("glob", {"pattern": "*.cu"}),
    ]
