// agent-runner web view: the buttons, the chat box, live statuses by polling the
// JSON API every 2 s, and a running attempt's events every 100 ms. Vanilla JS, no
// build step. Text from the server is only ever put into the page as text
// (textContent), never as HTML.
'use strict';

(function () {
  const POLL_MS = 2000;
  // A running attempt's events: SPEC §19 wants each seen within 200 ms of being
  // written; a poll reads only what is new.
  const LIVE_MS = 100;
  const RUNNABLE = new Set(['PENDING', 'FAILED', 'AWAITING_APPROVAL', 'SUCCEEDED']);
  // A follow-up message goes on from these (SPEC §23).
  const FOLLOWS_UP = new Set(['FAILED', 'AWAITING_APPROVAL', 'SUCCEEDED']);
  const token = document.querySelector('meta[name="agent-runner-token"]').content;
  const page = document.body.dataset.page;

  async function api(method, url, body) {
    const init = { method, headers: { Accept: 'application/json' } };
    if (method !== 'GET') {
      init.headers['Content-Type'] = 'application/json';
      init.headers['X-Agent-Runner-Token'] = token;
      init.body = JSON.stringify(body || {});
    }
    const response = await fetch(url, init);
    let data = {};
    try {
      data = await response.json();
    } catch (e) {
      data = {};
    }
    if (!response.ok) {
      throw new Error(data.error || response.status + ' ' + response.statusText);
    }
    return data;
  }

  function el(tag, className, text) {
    const e = document.createElement(tag);
    if (className) e.className = className;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function notice(text, isError) {
    const p = document.getElementById('notice');
    p.textContent = text;
    p.classList.toggle('error', Boolean(isError));
    p.hidden = !text;
  }

  // A SUCCEEDED task whose test did not pass (or never ran) says so: the word of
  // an LLM alone is not proof (SPEC §16). pages.rs renders the same.
  function badge(span, status, verified) {
    const unverified = status === 'SUCCEEDED' && !verified;
    span.className = 'status s-' + status.toLowerCase() + (unverified ? ' s-unverified' : '');
    span.textContent = unverified ? 'SUCCEEDED (unverified)' : status;
  }

  function shortTime(rfc3339) {
    return (rfc3339 || '').slice(0, 19).replace('T', ' ');
  }

  function human(ms) {
    if (ms < 1000) return ms + ' ms';
    if (ms < 60000) return (ms / 1000).toFixed(1) + ' s';
    const s = Math.floor(ms / 1000);
    return Math.floor(s / 60) + ' min ' + (s % 60) + ' s';
  }

  // Dollars as the server writes them: up to six decimals, no trailing zeros.
  function usd(amount) {
    const text = amount.toFixed(6).replace(/0+$/, '').replace(/\.$/, '');
    return text === '' || text === '-' ? '0' : text;
  }

  // Runs `refresh` every `every` ms (POLL_MS by default) while the page is visible,
  // never two at once.
  function poll(refresh, every) {
    let busy = false;
    const tick = async function () {
      if (busy || document.hidden) return;
      busy = true;
      try {
        await refresh();
      } catch (e) {
        // The server may be restarting; the next tick tries again.
      } finally {
        busy = false;
      }
    };
    setInterval(tick, every || POLL_MS);
    document.addEventListener('visibilitychange', tick);
  }

  // The orchestrator's status in the header, and its Start button.
  const orchestrator = document.getElementById('orchestrator');
  const startButton = document.getElementById('start-orchestrator');

  function showOrchestrator(s) {
    const pids = (s.orchestrators || []).map((o) => o.pid);
    let text = 'orchestrator: not running';
    if (s.running) {
      text = pids.length ? 'orchestrator: running (pid ' + pids.join(', ') + ')' : 'orchestrator: running';
    }
    orchestrator.textContent = text;
    orchestrator.classList.toggle('on', Boolean(s.running));
    orchestrator.classList.toggle('off', !s.running);
    startButton.hidden = Boolean(s.running);
  }

  async function refreshOrchestrator() {
    showOrchestrator(await api('GET', '/api/orchestrator'));
  }

  startButton.addEventListener('click', async function () {
    startButton.disabled = true;
    try {
      await api('POST', '/api/orchestrator/start');
      notice('Orchestrator started.');
    } catch (e) {
      notice('Could not start the orchestrator: ' + e.message, true);
    } finally {
      startButton.disabled = false;
    }
    await refreshOrchestrator().catch(function () {});
  });
  poll(refreshOrchestrator);

  // Run buttons, on any page.
  let refreshPage = async function () {};
  document.addEventListener('click', async function (event) {
    const button = event.target.closest('button.continue');
    if (!button) return;
    button.disabled = true;
    try {
      const r = await api('POST', '/api/tasks/' + encodeURIComponent(button.dataset.id) + '/continue');
      notice('Task ' + r.task_id + ' continues (job ' + r.job_id + ').');
      location.reload();
    } catch (e) {
      notice(e.message, true);
      button.disabled = false;
    }
  });
  // The approval gate and follow-ups (SPEC §23): each sends what the user typed
  // as JSON, token-guarded like every POST.
  async function send(button, path, body, done) {
    button.disabled = true;
    try {
      const r = await api('POST', '/api/tasks/' + encodeURIComponent(button.dataset.id) + '/' + path, body);
      notice(done + ' (job ' + r.job_id + ').');
      location.reload();
    } catch (e) {
      notice(e.message, true);
      button.disabled = false;
    }
  }
  document.addEventListener('click', function (event) {
    const button = event.target.closest('#approve, #reject, #send-follow-up');
    if (!button) return;
    if (button.id === 'approve') {
      send(button, 'approve', {}, 'Plan approved');
      return;
    }
    const box = document.getElementById(button.id === 'reject' ? 'reject-message' : 'follow-up-message');
    const message = box.value.trim();
    if (!message) {
      notice('Write a message first.', true);
      box.focus();
      return;
    }
    if (button.id === 'reject') {
      send(button, 'reject', { message }, 'Plan rejected: Meta plans again');
    } else {
      send(button, 'continue', { message }, 'Message sent: the task goes on');
    }
  });
  document.addEventListener('click', async function (event) {
    const button = event.target.closest('button.run');
    if (!button) return;
    button.disabled = true;
    try {
      const r = await api('POST', '/api/tasks/' + encodeURIComponent(button.dataset.id) + '/run');
      notice('Task ' + r.task_id + ' enqueued (job ' + r.job_id + ').');
    } catch (e) {
      notice(e.message, true);
    }
    await refreshPage().catch(function () {});
  });

  function showRunButton(button, status, attempts) {
    button.disabled = !RUNNABLE.has(status);
    button.textContent = attempts > 0 ? 'Run again' : 'Run';
  }

  if (page === 'index') {
    const all = document.body.dataset.all === '1';
    const tbody = document.querySelector('#tasks tbody');

    const newRow = function (t) {
      const tr = el('tr');
      tr.dataset.id = t.id;
      const statusCell = el('td');
      statusCell.append(el('span'));
      const taskCell = el('td');
      const link = el('a', 'title');
      link.href = '/tasks/' + encodeURIComponent(t.id);
      taskCell.append(link, el('div', 'id', t.id));
      const button = el('button', 'run');
      button.type = 'button';
      button.dataset.id = t.id;
      const buttonCell = el('td');
      buttonCell.append(button);
      tr.append(statusCell, taskCell, el('td', 'n attempts'), el('td', 'last'),
        el('td', 'n tokens'), el('td', 'n cost'), buttonCell);
      return tr;
    };

    const updateRow = function (tr, t) {
      tr.dataset.status = t.status;
      const span = tr.cells[0].firstElementChild;
      badge(span, t.status, t.verified);
      const link = tr.cells[1].firstElementChild;
      if (link.textContent !== t.title) link.textContent = t.title;
      const attempts = String(t.attempts);
      if (tr.cells[2].textContent !== attempts) tr.cells[2].textContent = attempts;
      const a = t.last_attempt;
      const last = a ? shortTime(a.started_at) + ' · ' + a.status + ' · ' + human(a.duration_ms) : '—';
      if (tr.cells[3].textContent !== last) tr.cells[3].textContent = last;
      const tokens = a && a.tokens != null ? String(a.tokens) : '—';
      if (tr.cells[4].textContent !== tokens) tr.cells[4].textContent = tokens;
      const cost = a && a.cost_usd != null ? '$' + usd(a.cost_usd) : '—';
      if (tr.cells[5].textContent !== cost) tr.cells[5].textContent = cost;
      showRunButton(tr.cells[6].firstElementChild, t.status, t.attempts);
    };

    const refreshTasks = async function () {
      const data = await api('GET', '/api/tasks' + (all ? '?all=1' : ''));
      const existing = new Map(Array.from(tbody.rows, (r) => [r.dataset.id, r]));
      let previous = null;
      for (const t of data.tasks) {
        let tr = existing.get(t.id);
        if (tr) {
          existing.delete(t.id);
        } else {
          tr = newRow(t);
        }
        updateRow(tr, t);
        const wanted = previous ? previous.nextSibling : tbody.firstChild;
        if (wanted !== tr) tbody.insertBefore(tr, wanted);
        previous = tr;
      }
      for (const tr of existing.values()) tr.remove();
      document.getElementById('count').textContent = String(data.tasks.length);
      document.getElementById('empty').hidden = data.tasks.length > 0;
    };
    refreshPage = refreshTasks;
    poll(refreshTasks);

    // The chat box: a new task, or with "plan" a plan request.
    const form = document.getElementById('chat');
    const prompt = document.getElementById('prompt');
    const planToggle = document.getElementById('plan-toggle');
    const send = document.getElementById('send');
    const chatStatus = document.getElementById('chat-status');
    const planResult = document.getElementById('plan-result');

    const say = function (text, isError) {
      chatStatus.textContent = text;
      chatStatus.classList.toggle('error', Boolean(isError));
    };

    planToggle.addEventListener('change', function () {
      send.textContent = planToggle.checked ? 'Plan' : 'Create task';
    });

    const showPlan = function (run) {
      planResult.replaceChildren();
      planResult.append(el('h3', '', 'Plan ' + run.state + (run.exit ? ' (' + run.exit + ')' : '')));
      const meta = run.meta;
      if (meta && meta.text) {
        planResult.append(el('p', 'label', "Meta's understanding"), el('p', 'understanding', meta.text));
      }
      const conflicts = meta && Array.isArray(meta.potential_conflicts) ? meta.potential_conflicts : [];
      if (conflicts.length) {
        planResult.append(el('p', 'label', 'Potential conflicts'));
        const ul = el('ul', 'conflicts');
        for (const c of conflicts) {
          ul.append(el('li', '', typeof c === 'string' ? c : JSON.stringify(c)));
        }
        planResult.append(ul);
      }
      if (run.output) planResult.append(el('pre', 'output', run.output));
      if (run.state !== 'succeeded' && run.errors) planResult.append(el('pre', 'output error', run.errors));
      planResult.hidden = false;
    };

    const watchPlan = function (id) {
      const timer = setInterval(async function () {
        let run;
        try {
          run = await api('GET', '/api/plan/runs/' + id);
        } catch (e) {
          return;
        }
        if (run.state === 'running') return;
        clearInterval(timer);
        say(run.state === 'succeeded' ? 'Plan done.' : 'Plan failed.', run.state !== 'succeeded');
        showPlan(run);
        await refreshTasks().catch(function () {});
      }, 1000);
    };

    form.addEventListener('submit', async function (event) {
      event.preventDefault();
      const text = prompt.value;
      if (!text.trim()) return;
      send.disabled = true;
      try {
        if (planToggle.checked) {
          const r = await api('POST', '/api/plan', { message: text });
          prompt.value = '';
          planResult.hidden = true;
          say('Planning… (Meta is breaking it into tasks)');
          watchPlan(r.run);
        } else {
          const r = await api('POST', '/api/tasks', { prompt: text });
          prompt.value = '';
          say('Created task ' + r.id + '.');
          await refreshTasks();
        }
      } catch (e) {
        say(e.message, true);
      } finally {
        send.disabled = false;
      }
    });
  }

  if (page === 'task') {
    const taskId = document.body.dataset.taskId;
    const shownAttempts = Number(document.body.dataset.attempts);
    const refreshTask = async function () {
      const d = await api('GET', '/api/tasks/' + encodeURIComponent(taskId));
      badge(document.getElementById('status'), d.status, d.verified);
      const button = document.querySelector('button.run');
      if (button) showRunButton(button, d.status, d.attempts.length);
      const again = document.querySelector('button.continue');
      if (again) again.hidden = d.status !== 'FAILED';
      const followUp = document.getElementById('follow-up');
      if (followUp) followUp.hidden = !FOLLOWS_UP.has(d.status);
      // A new attempt brings a new result, note and files: show them.
      if (d.attempts.length !== shownAttempts) location.reload();
    };
    refreshPage = refreshTask;
    poll(refreshTask);

    // A queued or running attempt's events as they come; its note once it ends.
    const live = document.getElementById('live');
    if (live) {
      const pre = document.getElementById('events');
      const stage = document.getElementById('live-stage');
      let job = live.dataset.job || '';
      let file = live.dataset.file || '0';
      let offset = live.dataset.offset || '0';
      let ended = false;
      const follow = async function () {
        if (ended) return;
        const query = '?job=' + encodeURIComponent(job) + '&file=' + file + '&offset=' + offset;
        const d = await api('GET', '/api/tasks/' + encodeURIComponent(taskId) + '/events' + query);
        if (d.restarted) pre.textContent = '';
        if (d.lines.length) {
          pre.append(document.createTextNode(d.lines.join('\n') + '\n'));
          pre.scrollTop = pre.scrollHeight;
        }
        job = d.job_id || job;
        file = String(d.cursor.file);
        offset = String(d.cursor.offset);
        if (stage.textContent !== d.stage) stage.textContent = d.stage;
        if (d.stage === 'ended') {
          ended = true;
          location.reload();
        }
      };
      poll(follow, LIVE_MS);

      const stop = document.getElementById('stop');
      stop.addEventListener('click', async function () {
        stop.disabled = true;
        try {
          const r = await api('POST', '/api/tasks/' + encodeURIComponent(taskId) + '/stop');
          notice(r.message);
        } catch (e) {
          notice('Could not stop it: ' + e.message, true);
          stop.disabled = false;
        }
      });
    }
  }
})();
